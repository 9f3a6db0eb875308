"""The asyncio transport: one protocol per TCP connection, a pool, a sweeper and an RPC façade.

Layering (style guide, "httpcore"): :mod:`.rpc_client` → :mod:`.pool` → :mod:`.connection` →
``tubemq_aio.protocol`` (pure framing and envelope code). The pool's decisions (which connections
are idle, when the next connect attempt is allowed) live in :mod:`.decisions` as pure functions.
"""
