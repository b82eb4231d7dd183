"""What `ss` and `ps` show of a test's processes, read from /proc: the TCP addresses a process listens on
(its socket descriptors matched against the kernel's tables of sockets in the LISTEN state, as `ss -ltnp`),
and the command lines of a process group's processes."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

_LISTEN = "0A"


def _address(hex_address: str) -> str:
    """/proc/net/tcp{,6} write an address as 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(swapped) == 4:
        return socket.inet_ntop(socket.AF_INET, swapped)
    address = ipaddress.IPv6Address(swapped)
    return str(address.ipv4_mapped or address)  # a Java socket bound to 127.0.0.1 shows as ::ffff:127.0.0.1


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(host, port) of every TCP socket process `pid` listens on; empty once it has ended."""
    try:
        inodes = {
            link[len("socket:[") : -1]
            for link in (os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir())
            if link.startswith("socket:[")
        }
        tables = [Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:] for name in ("tcp", "tcp6")]
    except OSError:  # it ended, or a descriptor closed, while it was read
        return set()
    found = set()
    for line in (line for table in tables for line in table):
        fields = line.split()
        if fields[3] == _LISTEN and fields[9] in inodes:
            host, port = fields[1].rsplit(":", 1)
            found.add((_address(host), int(port, 16)))
    return found


def group_command_lines(group: int) -> dict[int, str]:
    """The command lines of the processes in process group `group`, as `ps` would show them, by pid."""
    lines = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state_ppid_pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
            if int(state_ppid_pgrp[2]) == group:
                command_line = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                lines[int(stat.parent.name)] = command_line
        except (OSError, IndexError, ValueError):
            continue  # a process that ended while it was read
    return lines
