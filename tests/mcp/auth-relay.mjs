// auth-relay.mjs - a loopback HTTP relay that adds "Authorization: Bearer
// TOKEN" to every request and passes everything else through unchanged
// (method, path, Host, Origin, body; status, headers, body back).  The MCP
// conformance suite's client sends no token; this stands in for a client
// configured with one.
//
//   node auth-relay.mjs TARGET_PORT TOKEN_FILE PORT_FILE
// Listens on 127.0.0.1:0 and writes its port to PORT_FILE.
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';

const [targetPort, tokenFile, portFile] = process.argv.slice(2);
const token = readFileSync(tokenFile, 'utf8').trim();

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = http.request(
    { host: '127.0.0.1', port: Number(targetPort), method: req.method, path: req.url, headers },
    (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
    },
  );
  up.on('error', (e) => {
    res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`relay: ${e.message}\n`);
  });
  req.pipe(up);
});
server.listen(0, '127.0.0.1', () => writeFileSync(portFile, `${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
