"""The asyncio transport: one protocol per TCP connection, a pool, a sweeper and the one façade
(:class:`~tubemq_aio._io.rpc_client.RpcClient`) that producer, consumers and master sessions call.

Layering (style guide, "httpcore"): :mod:`.rpc_client` → :mod:`.pool` → :mod:`.connection` →
``tubemq_aio.protocol`` (pure framing and envelope code). The pool's decisions (which connections
are idle, when the next connect attempt is allowed) live in :mod:`.decisions` as pure functions.
"""
