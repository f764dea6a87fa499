"""tlsserver.py - the HTTPS server that the test servers here share
(fakeapi.py, oauthd.py, toolsrv.py): HTTP/1.1 with keep-alive, a thread
per connection, the TLS handshake made in that thread (a client that
stalls in it holds up no one else), quiet about connections that fail or
go away.

    srv = tlsserver.Server((addr, port), Handler, cert, key)   # addr may be IPv6
    srv.serve_forever()

Handler derives from tlsserver.Handler (the socket timeout: TIMEOUT).
"""

import http.server
import socket
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    TIMEOUT = 60  # seconds a connection may sit idle, the handshake included

    def setup(self):
        self.request.settimeout(self.TIMEOUT)
        self.request.do_handshake()
        super().setup()

    def log_message(self, fmt, *a):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler, cert, key, alpn=None):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        if alpn:
            self.ctx.set_alpn_protocols(alpn)

    def get_request(self):
        sock, addr = super().get_request()
        # The handshake happens in the connection's own thread (setup()).
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):  # TLS failures, resets: quiet
            super().handle_error(request, client_address)
