"""What to do next, added to an error line when the tool can tell (an absent master)."""

from __future__ import annotations

import argparse

from tubemq_aio.cli._connect import URL_SCHEMES
from tubemq_aio.cli._parser import MASTER_ENV, MASTER_FROM_ENV
from tubemq_aio.config import ClientConfig, parse_masters
from tubemq_aio.errors import ConfigError, ConnectError, TubeMQError

__all__ = ["unreachable_master_hint"]


def _master_addresses(master: str) -> list[str]:
    """``host:port`` of every master ``master`` (a list or a ``tubemq[s]://`` URL) names."""
    if master.startswith(URL_SCHEMES):
        return [str(m) for m in ClientConfig.from_url(master).masters]
    return [str(m) for m in parse_masters(master)]


def unreachable_master_hint(args: argparse.Namespace, err: TubeMQError) -> str:
    """``"; <what to do>"`` when ``err`` is a failed connect to a master of ``args.master``,
    else ``""``.

    The hint names where the address came from (``--master`` or ``$TUBEMQ_AIO_MASTER``: an
    exported address of a cluster started earlier on another port is the usual cause) and the
    commands that show or start a local cluster.
    """
    master = getattr(args, "master", None)
    if not isinstance(err, ConnectError) or not master:
        return ""
    try:
        addresses = _master_addresses(master)
    except ConfigError:
        return ""
    if not any(f"cannot connect to {address}:" in str(err) for address in addresses):
        return ""  # a broker the master listed: the master answered
    source = (
        f"${MASTER_ENV}={','.join(addresses)}"
        if getattr(args, MASTER_FROM_ENV, False)
        else f"--master {','.join(addresses)}"
    )
    return (
        f"; no master answers at {source}: is it running there? `tubemq-aio cluster status` "
        "prints a local cluster's master, `tubemq-aio cluster up --fake` starts one to try"
    )
