"""corl.sandbox.hostfs.remove_tree never crosses into another file system: a mount under the folder keeps its files.

A `none` run's work folder is on the host's disk; a program (or anything else) that gets a
file system mounted under it (a bind of a host folder, a tmpfs) must not have the removal
walk into the mount and delete what lives there. The mount is made in a private mount
namespace of its own (unshare --mount), where the removal then runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import corl

_SRC = os.path.dirname(os.path.dirname(os.path.abspath(corl.__file__)))
_INSIDE = """
import ctypes, json, os, shutil, sys, tempfile
from corl.sandbox.hostfs import remove_tree
libc = ctypes.CDLL(None, use_errno=True)
top = tempfile.mkdtemp()
os.makedirs(os.path.join(top, "run", "deep"))
open(os.path.join(top, "run", "deep", "mine"), "w").write("x")
mount = os.path.join(top, "run", "mnt")
os.mkdir(mount)
if libc.mount(b"tmpfs", mount.encode(), b"tmpfs", 0, b"size=1m") != 0:
    print(json.dumps({"skip": os.strerror(ctypes.get_errno())}))
    raise SystemExit(0)
open(os.path.join(mount, "precious"), "w").write("kept")
os.mkdir(os.path.join(mount, "folder"))
open(os.path.join(mount, "folder", "also"), "w").write("kept")
gone = remove_tree(os.path.join(top, "run"))
left = sorted(os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(top) for f in fs)
print(json.dumps({"gone": gone, "left": left}))
libc.umount2(mount.encode(), 2)
shutil.rmtree(top)
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare for a private mount namespace")
def test_removal_does_not_cross_into_a_mount():
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", _INSIDE],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": _SRC},
    )
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        pytest.skip(f"no mount namespace for this user: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(f"cannot mount a tmpfs here: {out['skip']}")
    # The folder's own files are gone; the mount's are all there; the folder stays (its mount point is busy).
    assert out == {"gone": False, "left": ["run/mnt/folder/also", "run/mnt/precious"]}
