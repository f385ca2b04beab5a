#!/usr/bin/env python3
"""How long `mcp-cli search` takes from the catalogue, at 500 and 5,000 tools, cold (a new
process each time) and warm (through the daemon), by words alone and fused with the search
model: the medians, and the ratios fused/words and warm/cold.

The tools are the recorded listings of tests/data/search/servers, copied (renamed) until
there are enough, served 100 a server by the test fixture's `recorded` mode, listed once into
a scratch state folder; then only the catalogue is read. Build first, then run from the
repository's root:

    cargo build --release -p mcp-client-cli -p mcp-tests --bin mcp-cli --bin mcp-fixture
    python3 scripts/search-latency.py --model ~/.local/share/mcp-cli/search-model

(`--model` names a search model folder; without one only the words are timed.)
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 15


def tools_of_recorded_servers():
    tools = []
    for file in sorted((ROOT / "tests/data/search/servers").glob("*.json")):
        listing = json.loads(file.read_text())
        prefix = listing["server"].replace("-", "_")
        for tool in listing["tools"]:
            tools.append(dict(tool, name=f"{prefix}_{tool['name']}"))
    return tools


def write_config(folder, fixture, tools, total):
    """A config of servers of 100 tools each, `total` tools in all."""
    copies, copy = [], 0
    while len(copies) < total:
        for tool in tools[: total - len(copies)]:
            copies.append(dict(tool, name=tool["name"] + (f"_{copy}" if copy else "")))
        copy += 1
    config = ""
    for start in range(0, total, 100):
        listing = folder / f"s{start // 100}.json"
        listing.write_text(json.dumps({"tools": copies[start : start + 100]}))
        config += f'[mcp.s{start // 100}]\ncommand = "{fixture}"\n'
        config += f'args = ["recorded", "--tools", "{listing}"]\n\n'
    (folder / "config.toml").write_text(config)
    return folder / "config.toml"


def median_ms(command, env):
    times = []
    for run in range(RUNS + 2):
        began = time.perf_counter()
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if run >= 2:  # two warm-up runs
            times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a search model folder")
    parser.add_argument("--binaries", type=Path, default=ROOT / "target/release")
    args = parser.parse_args()
    cli, fixture = args.binaries / "mcp-cli", args.binaries / "mcp-fixture"
    scratch = Path(tempfile.mkdtemp(prefix="search-latency-"))
    tools = tools_of_recorded_servers()
    print(f"{len(tools)} recorded tools; {RUNS} runs each, medians in ms")
    print(f"{'tools':>6} {'ranking':8} {'cold':>8} {'warm':>8} {'warm/cold':>10}")
    try:
        for total in (500, 5000):
            folder = scratch / str(total)
            folder.mkdir()
            config = write_config(folder, fixture, tools, total)
            env = dict(os.environ, HOME=str(folder), XDG_STATE_HOME=str(folder / "state"),
                       XDG_CONFIG_HOME=str(folder / "config"), XDG_RUNTIME_DIR=str(folder / "run"),
                       XDG_DATA_HOME=str(folder / "data"))
            env.pop("MCP_CLI_SEARCH_MODEL", None)
            (folder / "run").mkdir(mode=0o700)
            base = [str(cli), "--config", str(config)]
            subprocess.run(base + ["tools"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            search = base + ["search", "read", "a", "file", "--limit", "3"]
            rankings = [("words", {})]
            if args.model:
                rankings.append(("fused", {"MCP_CLI_SEARCH_MODEL": str(args.model)}))
            cold_words = None
            for name, extra in rankings:
                ranked = dict(env, **extra)
                cold = median_ms(search, dict(ranked, MCP_CLI_NO_DAEMON="1"))
                subprocess.run(base + ["daemon", "start"], env=ranked, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=True)
                try:
                    warm = median_ms(search, ranked)
                finally:
                    subprocess.run(base + ["daemon", "stop"], env=ranked, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                cold_words = cold_words or cold
                print(f"{total:6} {name:8} {cold:8.1f} {warm:8.1f} {warm / cold:10.2f}"
                      + (f"   fused/words cold {cold / cold_words:.2f}" if name == "fused" else ""))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
