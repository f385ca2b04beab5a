//! The whole flow against canned servers: login, use, refresh, step-up, limits.
