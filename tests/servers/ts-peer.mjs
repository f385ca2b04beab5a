//! A small server on the TypeScript SDK v2 (`@modelcontextprotocol/server`), a modern test peer.
//
// Usage: node --preserve-symlinks-main PREFIX/ts-peer.mjs [--http PORT]
// The install step links this file into the npm prefix that holds the SDK, so its bare imports
// resolve there. Over HTTP it prints `http://127.0.0.1:PORT/mcp` on stdout once listening
// (PORT 0 picks a free port).
//
// Offers: `add {a, b}`, `confirm {action}` (asks through `input_required`), `sleep {ms}`
// (reports progress until cancelled), `add_tool` (adds `extra`, so the tool list changes),
// the resource `peer://greeting`, the prompt `greet {name}`, and through the skills extension
// (SEP-2640) the skill `pdf-tools`: a SKILL.md, a text file in a subfolder and a binary file.

import http from 'node:http';
import { z } from 'zod';
import { McpServer, acceptedContent, createMcpHandler, inputRequired } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { SkillsExtension, memorySkillFiles } from '@modelcontextprotocol/server/ext/skills';

// One catalog for every instance (over HTTP each request builds one).
const skills = await SkillsExtension.load(
    memorySkillFiles({
        'pdf-tools/SKILL.md': [
            '---',
            'name: pdf-tools',
            'description: "Fill in PDF forms: read the fields, then write them."',
            'license: MIT',
            'metadata:',
            '  version: "2"',
            '  author: peer',
            '---',
            '# PDF tools',
            '',
            'Read references/FORMS.md before filling a form.',
            ''
        ].join('\n'),
        'pdf-tools/references/FORMS.md': 'Fields are named by their label.\n',
        'pdf-tools/assets/mark.bin': new Uint8Array([0, 1, 2, 255, 254, 10])
    })
);

// The tool list is the process's, not one instance's: over HTTP every request gets a fresh
// instance from the factory.
let extraAdded = false;
// How a change is announced: on stdio the pinned instance announces its own `registerTool`;
// over HTTP nobody is connected to an instance between requests, so the handler's bus does.
let announceExtra = server => registerExtra(server);

function registerExtra(server) {
    server.registerTool('extra', { description: 'Added by add_tool' }, async () => ({
        content: [{ type: 'text', text: 'extra' }]
    }));
}

function build() {
    const server = new McpServer(
        { name: 'ts-peer', version: '1.0.0' },
        { capabilities: { tools: { listChanged: true }, resources: {}, prompts: {} } }
    );
    server.registerTool(
        'add',
        { description: 'Adds two numbers', inputSchema: z.object({ a: z.number(), b: z.number() }) },
        async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] })
    );
    const answer = z.object({ ok: z.boolean() });
    server.registerTool(
        'confirm',
        { description: 'Asks the user to confirm an action', inputSchema: z.object({ action: z.string() }) },
        async ({ action }, ctx) => {
            const confirmed = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', answer);
            if (confirmed === undefined) {
                return inputRequired({
                    inputRequests: {
                        confirm: inputRequired.elicit({ message: `Really ${action}?`, requestedSchema: answer })
                    },
                    requestState: `confirm:${action}`
                });
            }
            const state = ctx.mcpReq.requestState();
            const verdict = confirmed.ok ? 'confirmed' : 'declined';
            return { content: [{ type: 'text', text: `${verdict} ${action} (state ${state})` }] };
        }
    );
    server.registerTool(
        'sleep',
        { description: 'Sleeps until cancelled or ms pass, reporting progress', inputSchema: z.object({ ms: z.number() }) },
        async ({ ms }, ctx) => {
            const token = ctx.mcpReq._meta?.progressToken;
            const signal = ctx.mcpReq.signal;
            for (let waited = 0; waited < ms && !signal.aborted; waited += 100) {
                if (token !== undefined) {
                    await ctx.mcpReq.notify({
                        method: 'notifications/progress',
                        params: { progressToken: token, progress: waited, total: ms }
                    });
                }
                await new Promise(resolve => setTimeout(resolve, 100));
            }
            if (signal.aborted) process.stderr.write('ts-peer: sleep cancelled\n');
            return { content: [{ type: 'text', text: signal.aborted ? 'cancelled' : 'slept' }] };
        }
    );
    server.registerTool('add_tool', { description: 'Adds the tool `extra`' }, async () => {
        if (!extraAdded) {
            extraAdded = true;
            announceExtra(server);
        }
        return { content: [{ type: 'text', text: 'added extra' }] };
    });
    if (extraAdded) registerExtra(server);
    skills.attach(server);
    server.registerResource(
        'greeting',
        'peer://greeting',
        { mimeType: 'text/plain', cacheHint: { ttlMs: 60000, cacheScope: 'public' } },
        async uri => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'hello from ts-peer' }] })
    );
    server.registerPrompt(
        'greet',
        { description: 'Greets someone', argsSchema: z.object({ name: z.string() }) },
        ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Say hello to ${name}.` } }] })
    );
    return server;
}

function serveHttp(port) {
    const handler = createMcpHandler(build);
    announceExtra = () => handler.notify.toolsChanged();
    const server = http.createServer(async (req, res) => {
        const chunks = [];
        for await (const chunk of req) chunks.push(chunk);
        const abort = new AbortController();
        res.on('close', () => abort.abort());
        const request = new Request(`http://${req.headers.host}${req.url}`, {
            method: req.method,
            headers: req.headers,
            body: req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks),
            signal: abort.signal
        });
        const response = await handler.fetch(request);
        res.writeHead(response.status, Object.fromEntries(response.headers));
        if (response.body === null) return res.end();
        try {
            for await (const chunk of response.body) res.write(chunk);
        } catch {
            // The client went away mid-stream.
        }
        res.end();
    });
    server.listen(port, '127.0.0.1', () => {
        process.stdout.write(`http://127.0.0.1:${server.address().port}/mcp\n`);
    });
}

const httpFlag = process.argv.indexOf('--http');
if (httpFlag === -1) {
    serveStdio(build);
} else {
    serveHttp(Number(process.argv[httpFlag + 1] ?? 0));
}
