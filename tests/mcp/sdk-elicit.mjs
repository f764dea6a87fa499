// sdk-elicit.mjs - the official MCP SDK client, declaring the elicitation
// capability, calls the test-only tool test_confirm of mcp_fake_server
// (--elicit-tool yes): the server sends elicitation/create while the tool
// call runs (over HTTP on the POST's event stream), the client's handler
// answers, and the tool's result carries that answer.  Prints "ok - ..."
// lines (tests/mcp/lib.sh numbers them).
//
//   node sdk-elicit.mjs stdio CMD [ARGS...]
//   node sdk-elicit.mjs http URL TOKEN_FILE
import { check, done, sdk, transportFor } from './sdk-lib.mjs';

const { Client } = await sdk('client/index.js');
const { ElicitRequestSchema } = await sdk('types.js');

const [mode, ...rest] = process.argv.slice(2);
const transport = transportFor(mode, rest);
const client = new Client({ name: 'egressd-elicit', version: '1.0.0' },
  { capabilities: { elicitation: {} } });
const asked = [];
let answer = { action: 'accept', content: { confirm: true } };
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params);
  return answer;
});
await client.connect(transport);

let r = await client.callTool({ name: 'test_confirm', arguments: { question: 'Delete it?' } });
check(asked.length === 1 && asked[0].message === 'Delete it?' &&
  asked[0].requestedSchema?.properties?.confirm?.type === 'boolean',
`${mode}: the server asked the client (elicitation/create) while the tool ran`, asked);
check(r.isError === false && r.structuredContent?.action === 'accept' &&
  r.structuredContent?.content?.confirm === true,
`${mode}: the client's accept came back into the tool's result`, r);
answer = { action: 'decline' };
r = await client.callTool({ name: 'test_confirm', arguments: {} });
check(r.isError === false && r.structuredContent?.action === 'decline' && asked.length === 2,
  `${mode}: a decline comes back as decline`, r);
await client.close();
done();
