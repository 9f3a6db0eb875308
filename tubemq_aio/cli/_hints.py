"""What to do next, added to an error line when the tool can tell (an absent master, a
broker's port given for the master's)."""

from __future__ import annotations

import argparse

from tubemq_aio.cli._connect import URL_SCHEMES
from tubemq_aio.cli._parser import MASTER_ENV, MASTER_FROM_ENV
from tubemq_aio.config import ClientConfig, parse_masters
from tubemq_aio.errors import ConfigError, ConnectError, NoMasterServiceError, TubeMQError

__all__ = ["master_hint"]


def _master_addresses(master: str) -> list[str]:
    """``host:port`` of every master ``master`` (a list or a ``tubemq[s]://`` URL) names."""
    if master.startswith(URL_SCHEMES):
        return [str(m) for m in ClientConfig.from_url(master).masters]
    return [str(m) for m in parse_masters(master)]


def master_hint(args: argparse.Namespace, err: TubeMQError) -> str:
    """``"; <what to do>"`` when ``err`` shows ``args.master`` names no master: nothing
    answers there (a failed connect), or a TubeMQ node without the master service does (a
    broker's client port: :class:`~tubemq_aio.errors.NoMasterServiceError`, whose text names
    the master's port); else ``""``.

    The hint names where the address came from (``--master`` or ``$TUBEMQ_AIO_MASTER``: an
    exported address of a cluster started earlier on another port is the usual cause) and the
    commands that show or start a local cluster.
    """
    master = getattr(args, "master", None)
    if not master or not isinstance(err, ConnectError | NoMasterServiceError):
        return ""
    try:
        addresses = _master_addresses(master)
    except ConfigError:
        return ""
    if isinstance(err, NoMasterServiceError):  # its text names the ports: say where it came from
        return f"; the address came from {_source(args, addresses)}"
    if not any(f"cannot connect to {address}:" in str(err) for address in addresses):
        return ""  # a broker the master listed: the master answered
    return (
        f"; no master answers at {_source(args, addresses)}: is it running there? "
        "`tubemq-aio cluster status` prints a local cluster's master, "
        "`tubemq-aio cluster up --fake` starts one to try"
    )


def _source(args: argparse.Namespace, addresses: list[str]) -> str:
    """Where the master addresses came from: ``--master A,B`` or ``$TUBEMQ_AIO_MASTER=A,B``."""
    if getattr(args, MASTER_FROM_ENV, False):
        return f"${MASTER_ENV}={','.join(addresses)}"
    return f"--master {','.join(addresses)}"
