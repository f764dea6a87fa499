// sdk-lib.mjs - what the SDK client scripts of tests/mcp share: the
// official MCP SDK (from $MCP_NODE_MODULES, installed by lib.sh's
// mcp_node_setup), a transport to the server under test, and TAP-style
// checks ("ok - ..." lines that tests/mcp/lib.sh numbers).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const nm = process.env.MCP_NODE_MODULES;
/* One module of the SDK's ESM build, e.g. sdk('client/index.js'). */
export const sdk = (p) => import(pathToFileURL(join(nm, '@modelcontextprotocol/sdk/dist/esm', p)).href);
const { StdioClientTransport } = await sdk('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

/* A transport for mode 'stdio' (args: CMD ARGS..., the server started by
 * the client) or 'http' (args: URL TOKEN_FILE, the bearer token). */
export function transportFor(mode, args) {
  return mode === 'stdio'
    ? new StdioClientTransport({ command: args[0], args: args.slice(1), env: process.env, stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(args[0]), {
      requestInit: { headers: { Authorization: `Bearer ${readFileSync(args[1], 'utf8').trim()}` } },
    });
}

let failures = 0;
/* One check: prints "ok - WHAT" or "not ok - WHAT" and the detail; returns cond. */
export function check(cond, what, detail) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${what}`);
  if (!cond) {
    failures++;
    if (detail !== undefined) console.log(`detail: ${JSON.stringify(detail).slice(0, 2000)}`);
  }
  return cond;
}

/* Ends the script: exit status 1 when a check failed. */
export function done() {
  process.exit(failures ? 1 : 0);
}
