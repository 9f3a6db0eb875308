"""Generated protobuf modules for the TubeMQ wire protocol (proto2).

``RPC_pb2`` holds the RPC envelope, ``MasterService_pb2`` the messages exchanged with the master
and ``BrokerService_pb2`` those exchanged with brokers. The ``*_pb2.py``/``*_pb2.pyi`` files are
generated from ``protos/*.proto`` by ``python -m tubemq_aio.protocol.pb.generate`` (``make
protos``) and committed; never edit them by hand. ``make protos-check`` verifies that they are
up to date.
"""
