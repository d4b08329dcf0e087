"""unread.py: unread_from(pid, peer_pid), the bytes waiting unread in process pid's Unix sockets that process
peer_pid sent (ss -xp: each socket's inode and its peer's, and the process owning it). A stopped ps (SIGSTOP) holds
a request of the master's exactly when this is above 0 (`tfx-node local` connects every peer by a Unix socket, and
the cluster sends no heartbeat). Imported by tests' Python (sys.path gets lib.sh's $PYLIB)."""
import re, subprocess


def unread_from(pid, peer_pid):
    out = subprocess.run(["ss", "-xpH"], capture_output=True, text=True, check=True).stdout
    owner, rows = {}, []
    for line in out.splitlines():
        f, m = line.split(), re.search(r"pid=([0-9]+),", line)
        if len(f) < 8 or not m:
            continue
        owner[f[5]] = int(m.group(1))  # the socket's inode
        rows.append((int(m.group(1)), int(f[2]), f[7]))  # its owner, Recv-Q, its peer's inode
    return sum(q for p, q, peer in rows if p == pid and owner.get(peer) == peer_pid)
