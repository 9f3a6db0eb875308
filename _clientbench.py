import asyncio, sys, time, subprocess, os, orjson, httpx
from benchmarks.gateway.lean_http import LeanClient
from tubemq_aio.protocol.consumer_replies import RawMessage
from tubemq_aio.protocol.message import crc32
from tubemq_aio.gateway.tubemq.fetched_messages import encode_messages_json
SERVER = r'''
import asyncio, sys
body = open(sys.argv[1], "rb").read()
head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
async def handle(r, w):
    try:
        while True:
            h = await r.readuntil(b"\r\n\r\n")
            n = 0
            for line in h.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"): n = int(line.split(b":")[1])
            if n: await r.readexactly(n)
            w.write(head + body)
            await w.drain()
    except Exception: pass
async def main():
    s = await asyncio.start_server(handle, "127.0.0.1", 18765)
    async with s: await s.serve_forever()
asyncio.run(main())
'''
body = b"x"*100
raw = tuple(RawMessage(i, crc32(body)&0x7FFFFFFF, body, 0) for i in range(1320))
answer = b'{"status":"ok","messages":' + encode_messages_json(raw, False) + b',"lease":{"token":"abc","partition_key":"1:t:0","expires_at":1,"redelivery":0}}'
open("/tmp/gwcpu_answer.json","wb").write(answer)
srv = subprocess.Popen([sys.executable, "-c", SERVER, "/tmp/gwcpu_answer.json"])
time.sleep(1)
N = 300
async def httpx_run():
    async with httpx.AsyncClient(base_url="http://127.0.0.1:18765", timeout=60) as c:
        for _ in range(N):
            r = await c.post("/f", json={"wait_ms": 500, "ack": ["t"]}, headers={"Authorization": "Bearer k"})
            d = orjson.loads(r.content); assert len(d["messages"]) == 1320
async def lean_run():
    async with LeanClient("http://127.0.0.1:18765", {"Authorization": "Bearer k"}) as c:
        for _ in range(N):
            r = await c.post("/f", json={"wait_ms": 500, "ack": ["t"]})
            d = orjson.loads(r.content); assert len(d["messages"]) == 1320
def parse_only():
    for _ in range(N): orjson.loads(answer)
try:
    for name, fn in [("httpx", httpx_run), ("lean", lean_run), ("httpx", httpx_run), ("lean", lean_run)]:
        t = time.process_time(); asyncio.run(fn()); print(name, round((time.process_time()-t)/N/1320*1e6, 3), "us CPU/msg")
    t = time.process_time(); parse_only(); print("orjson.loads only", round((time.process_time()-t)/N/1320*1e6, 3))
finally:
    srv.kill()
