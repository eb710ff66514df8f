#!/usr/bin/env bash
# Wraps `pev mcp` for Codex: copies the stdio JSON-RPC traffic to files.
#   PEV_BIN       the pev binary (required)
#   PEV_MCP_LOG   directory for the traffic: mcp-<pid>.in (client->server), .out (server->client), .err
set -u
dir="${PEV_MCP_LOG:?}"
mkdir -p "$dir"
base="$dir/mcp-$$"
pwd > "$base.cwd"
env | grep -E '^(CODEX|PEV|CLAUDE)' > "$base.env" || true
tee -a "$base.in" | "${PEV_BIN:?}" mcp "$@" 2>> "$base.err" | tee -a "$base.out"
