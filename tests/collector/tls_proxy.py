# A TLS front for the test collector, as an ingress (nginx, envoy) would be in front of a real
# one: rotel's receivers speak plain text, so TLS and header checks happen here.
#
#   python3 tls_proxy.py http PORT UPSTREAM_PORT CERT KEY HEADER_NAME HEADER_VALUE
#       HTTPS/1.1 on 127.0.0.1:PORT; requests without HEADER_NAME: HEADER_VALUE get 401,
#       others are forwarded to http://127.0.0.1:UPSTREAM_PORT.
#   python3 tls_proxy.py grpc PORT UPSTREAM_PORT CERT KEY
#       TLS (ALPN h2) on 127.0.0.1:PORT, bytes piped to the collector's plain gRPC port.
#
# Prints "ready" once listening. Standard library only.

import asyncio
import ssl
import sys


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def serve_grpc(reader, writer, upstream):
    try:
        ur, uw = await asyncio.open_connection("127.0.0.1", upstream)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, uw), pipe(ur, writer))


async def read_message(reader):
    """One HTTP/1.1 message head and body: (first line, headers, body) or None at EOF."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    return lines[0], headers, body


async def serve_http(reader, writer, upstream, header, expected):
    try:
        while True:
            try:
                first, headers, body = await read_message(reader)
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                return
            if headers.get(header) != expected:
                msg = b"missing or wrong " + header.encode() + b" header"
                writer.write(b"HTTP/1.1 401 Unauthorized\r\ncontent-type: text/plain\r\ncontent-length: "
                             + str(len(msg)).encode() + b"\r\n\r\n" + msg)
                await writer.drain()
                continue
            ur, uw = await asyncio.open_connection("127.0.0.1", upstream)
            method, path, _ = first.split(" ", 2)
            out = [f"{method} {path} HTTP/1.1", f"host: 127.0.0.1:{upstream}", "connection: close",
                   f"content-length: {len(body)}"]
            out += [f"{k}: {v}" for k, v in headers.items()
                    if k not in ("host", "connection", "content-length", "transfer-encoding")]
            uw.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)
            await uw.drain()
            status, rheaders, rbody = await read_message(ur)
            if "content-length" not in rheaders:
                rbody += await ur.read()
            uw.close()
            resp = [status, f"content-length: {len(rbody)}"]
            resp += [f"{k}: {v}" for k, v in rheaders.items()
                     if k not in ("content-length", "connection", "transfer-encoding")]
            writer.write(("\r\n".join(resp) + "\r\n\r\n").encode("latin-1") + rbody)
            await writer.drain()
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main():
    mode, port, upstream, cert, key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    if mode == "grpc":
        ctx.set_alpn_protocols(["h2"])
        handler = lambda r, w: serve_grpc(r, w, upstream)
    else:
        header, expected = sys.argv[6].lower(), sys.argv[7]
        ctx.set_alpn_protocols(["http/1.1"])
        handler = lambda r, w: serve_http(r, w, upstream, header, expected)
    server = await asyncio.start_server(handler, "127.0.0.1", port, ssl=ctx)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
