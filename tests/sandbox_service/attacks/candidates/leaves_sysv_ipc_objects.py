"""Class 3 (state that outlives the candidate): System V IPC. shmget, msgget and semget are not in the seccomp table
and touch no path, so Landlock does not see them; the objects they make belong to the IPC namespace, not to the
process, and stay after it dies (kernel.shm_rmid_forced is 0 by default): memory that nobody frees (a segment's
pages stay resident, up to shmmax/shmall, unlimited by default) and a channel from one evaluation to the next.
__MODE__ "leave": make a segment, a message queue and a semaphore set under fixed keys, write a marker into the
segment and a message into the queue, detach. "read": attach the segment by its key and print what it holds.
The ReLU itself is honest."""
import ctypes

import torch
import torch.nn as nn
import triton
import triton.language as tl

# INCLUDE _reach
# INCLUDE _honest_relu_model

SHM_KEY, MSG_KEY, SEM_KEY = 0x7A7A5301, 0x7A7A5302, 0x7A7A5303
IPC_CREAT = 0o1000
SEGMENT_BYTES = __MB__ << 20
MARKER = b"left by an earlier evaluation"


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    return libc


def _leave():
    _attempted("sysv-ipc-leave")
    libc = _libc()
    shmid = libc.shmget(SHM_KEY, ctypes.c_size_t(SEGMENT_BYTES), IPC_CREAT | 0o600)
    if shmid >= 0:
        address = libc.shmat(shmid, None, 0)
        ctypes.memset(address, 7, SEGMENT_BYTES)  # resident: the pages stay after we detach and die
        ctypes.memmove(address, MARKER, len(MARKER))
        libc.shmdt(address)
    msqid = libc.msgget(MSG_KEY, IPC_CREAT | 0o600)
    if msqid >= 0:
        message = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + len(MARKER))
        ctypes.cast(message, ctypes.POINTER(ctypes.c_long))[0] = 1
        ctypes.memmove(ctypes.addressof(message) + ctypes.sizeof(ctypes.c_long), MARKER, len(MARKER))
        libc.msgsnd(msqid, message, len(MARKER), 0o4000)  # IPC_NOWAIT
    semid = libc.semget(SEM_KEY, 1, IPC_CREAT | 0o600)
    print(f"shmid {shmid} msqid {msqid} semid {semid}", flush=True)


def _read():
    _attempted("sysv-ipc-read")
    libc = _libc()
    shmid = libc.shmget(SHM_KEY, ctypes.c_size_t(0), 0)
    if shmid < 0:
        print("no segment from an earlier evaluation", flush=True)
        return
    address = libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY
    found = ctypes.string_at(address, len(MARKER))
    libc.shmdt(address)
    print(f"read-from-earlier-evaluation {found!r}", flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _leave() if __MODE__ == "leave" else _read()

    def forward(self, x):
        return relu(x)
