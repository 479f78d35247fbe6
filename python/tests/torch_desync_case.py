#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Issue 48's desync jobs through torch.distributed, as tests/gpu/test_desync.c
runs them through the C API: three ranks, a process each, sharing GPU 0
(P2PKIT_SHARE_GPUS=1), make five calls together (four all-reduces, then a
broadcast, each result checked), then the sixth goes wrong, each rank's
report lands in a fresh directory, and `p2pkit trace DIR` must name the
rank and the call in its first line (the first four in the C jobs' words):
  skip   rank 1 skips the all-reduce and makes the job's next call, an
         all-gather, where ranks 0 and 2 make the all-reduce:
         "rank 1 called all_gather where ranks 0,2 called all_reduce at seq 6"
  count  rank 1 passes 1000 elements where the others pass 1024:
         "rank 1 passed count 1000 where ranks 0,2 passed 1024 at seq 6 (all_reduce)"
  die    rank 2 exits (os._exit) after call 5; the others time out at call 6:
         "rank 2's process is gone (pid N, gone when rank R dumped) and left
         no dump; the others' last call was seq 6 (all_reduce)"
  hang   rank 1 stops in its own code after call 5, the others wait at call
         6 under a long timeout=; this script, as a user would, sends every
         rank P2PKIT_TRACE_SIGNAL's signal (USR2), then kills them:
         "rank 1 never arrived at seq 6 (all_reduce); its last call was seq 5
         (broadcast, launched)"
  idle   rank 1 skips the all-reduce and makes no other call (it waits in
         its own code); the others time out. Its ring never gets call 6 and
         nothing fails on it, so it writes no report, and the verdict, read
         while it still runs, names it:
         "rank 1 left no dump; its process (pid N) still runs: it hangs where
         it cannot dump (P2PKIT_TRACE_SIGNAL lets a signal dump it); the
         others' last call was seq 6 (all_reduce)"
         (on the flight recorder, whose timeout dumps every live rank of the
         job, the hang's words)
Backends (--backend):
  p2pkit  init_process_group("cuda:p2pkit", timeout=): the reports are
          p2pkit's own, written by the library on its error or the watchdog's
          abort, by the watchdog (p2pkit_comm_dump_trace) when no abort
          follows, or on the signal; each rank that made call 6 waits for its
          own report, and the reason each report gives is checked.
  nccl    ProcessGroupNCCL on the same faults, ranks sharing the GPU as one
          simulated host each (NCCL_HOSTID, loopback): its flight recorder
          dumps (TORCH_FR_DUMP_TEMP_FILE) on the timeout
          (TORCH_NCCL_DUMP_ON_TIMEOUT); a rank still without a dump after it,
          and every rank of the hang, is asked by SIGUSR2, whose handler here
          writes torch's dump (_dump_nccl_trace) to the same file.
  gloo    the same on the CPU with gloo (no GPU): every dump through SIGUSR2
          (_dump_fr_trace). Checks this script's own machinery without a GPU;
          not count, where gloo ends rank 1's process before it can dump.
The flight recorder has no pids, so a dead rank reads "rank 2 left no dump
(gone, or hung where it could not dump); ...", and the state of call 5 is
the recorder's.

usage:
  torch_desync_case.py MODE [--backend p2pkit|nccl|gloo] [--timeout S]
                       [--handling N] [--keep DIR] [--cli PATH] [--limit S]
  torch_desync_case.py --check DIR MODE [--backend B] [--seq N] [--before KIND]
                       [--cli PATH]
--check judges a recorded job's reports only (no torch needed). Exit 0 when
the verdict is right, 1 when it is not, 2 for a bad command line, 77 when
torch (or, for p2pkit and nccl, a CUDA GPU) is missing."""
import argparse
import datetime
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

MODES = ("skip", "count", "die", "hang", "idle")
BACKENDS = ("p2pkit", "nccl", "gloo")
NR = 3          # ranks
COUNT = 1024    # elements of every call but count's rank 1
SEQ = 6         # the call that goes wrong
FR_PREFIX = "nccl_trace_rank_"  # the flight recorder's file name, then the rank


# ------------------------------------------------------------ the verdict --

def wanted(mode, source, seq=SEQ, before="broadcast", pid=None):
    """The first line `p2pkit trace` must print for the job: (a regular
    expression, the same as it reads). source: "p2pkit" (p2pkit's reports)
    or "torch" (flight recorder dumps); pid: the culprit's (die: rank 2,
    idle: rank 1, which still runs as the job is judged), when known."""
    def parts(*ps):  # str: literal; (regex, text): a varying field
        return ("".join(re.escape(p) if isinstance(p, str) else p[0] for p in ps),
                "".join(p if isinstance(p, str) else p[1] for p in ps))
    if mode == "skip":
        return parts(f"rank 1 called all_gather where ranks 0,2 called all_reduce at seq {seq}")
    if mode == "count":
        return parts(f"rank 1 passed count 1000 where ranks 0,2 passed {COUNT} at seq {seq} (all_reduce)")
    last = f"; the others' last call was seq {seq} (all_reduce)"
    if mode == "die" and source == "p2pkit":
        who = (str(pid), str(pid)) if pid else (r"\d+", "N")
        return parts("rank 2's process is gone (pid ", who, ", gone when rank ", ("[01]", "0|1"),
                     " dumped) and left no dump" + last)
    if mode == "die":
        return parts("rank 2 left no dump (gone, or hung where it could not dump)" + last)
    if mode == "idle" and source == "p2pkit":  # its ring never got call 6: no error, no report
        hint = "P2PKIT_TRACE_SIGNAL lets a signal dump it"
        runs = f"; its process (pid {pid}) still runs: it hangs where it cannot dump ({hint})"
        if pid:
            return parts("rank 1 left no dump" + runs + last)
        return parts("rank 1 left no dump", (r"(; its process \(pid \d+\) (still runs: it hangs where it "
                                            r"cannot dump \(" + re.escape(hint) + r"\)|is not running now)"
                                            r"| \(gone, or hung where it could not dump: " + re.escape(hint)
                                            + r"\))", " (still runs, not running now, or gone)"), last)
    state = ("launched", "launched") if source == "p2pkit" else \
        ("(scheduled|started|completed)", "scheduled|started|completed")
    return parts(f"rank 1 never arrived at seq {seq} (all_reduce); its last call was seq {seq - 1} "
                 f"({before}, ", state, ")")


def trace(cli, d, as_json=False):
    """`p2pkit trace DIR [--json]`: (exit code, stdout, stderr)."""
    try:
        r = subprocess.run([cli, "trace", d] + (["--json"] if as_json else []), capture_output=True,
                           text=True, timeout=60)
    except OSError as e:
        return 127, "", f"{cli}: {e.strerror}"
    return r.returncode, r.stdout, r.stderr


def judge(cli, d, mode, source, seq=SEQ, before="broadcast", pid=None):
    """`p2pkit trace DIR` printed, its first line against the wanted one:
    True when it is that line."""
    rc, out, err = trace(cli, d)
    sys.stdout.write(out + err)
    line = out.split("\n", 1)[0]
    pattern, reads = wanted(mode, source, seq, before, pid)
    if rc == 0 and re.fullmatch(pattern, line):
        print(f"verdict: {line}")
        return True
    print(f"FAIL: {mode}: `p2pkit trace {d}` exited {rc} with the verdict \"{line}\", not "
          f"\"{reads}\"")
    return False


# ------------------------------------------------------------- a rank -----

def mark(marks, what, rank):
    with open(os.path.join(marks, f"{what}.r{rank}"), "w"):
        pass


def marked(marks, what, rank):
    return os.path.exists(os.path.join(marks, f"{what}.r{rank}"))


def await_marks(marks, what, ranks, rank, seconds=120):
    """Until every rank of `ranks` has made mark `what`, at most `seconds`."""
    end = time.monotonic() + seconds
    while not all(marked(marks, what, r) for r in ranks):
        if time.monotonic() > end:
            print(f"rank {rank}: ranks {list(ranks)} not all at '{what}' after {seconds} s", flush=True)
            os._exit(1)
        time.sleep(0.01)


def idle(seconds):
    """Sleep until killed, at most `seconds`; then the launcher failed."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.1)
    os._exit(3)


def own_report(reports, rank):
    """This process's whole p2pkit report (its `end` line written), or None."""
    for p in sorted(glob.glob(os.path.join(reports, f"p2pkit-trace-*-r{rank}-p{os.getpid()}-*.txt"))):
        with open(p, errors="replace") as f:
            if re.search(r"^end \d+$", f.read(), re.M):
                return p
    return None


def fr_handler(backend, reports, marks, rank):
    """SIGUSR2: torch's flight recorder dump of this process, written as
    torch writes it on a timeout (<prefix><rank>), whole (renamed in)."""
    def dump(signum, frame):
        import torch._C._distributed_c10d as c10d
        get = c10d._dump_nccl_trace if backend == "nccl" else c10d._dump_fr_trace
        data = get(includeCollectives=True, includeStackTraces=False, onlyActive=False)
        tmp = os.path.join(marks, f"fr.r{rank}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(reports, f"{FR_PREFIX}{rank}"))
        print(f"rank {rank}: flight recorder dump written on SIGUSR2", flush=True)
    return dump


def checked(x, want, rank, call):
    got = x.cpu()
    if not bool((got == want).all()):
        print(f"rank {rank}: call {call} gave {got[0].item()} (and others), not {want}", flush=True)
        os._exit(1)


def good_calls(dist, x, rank):
    """Calls 1-5, each checked: four all-reduces of rank + 1, a broadcast from 0."""
    for i in range(1, 5):
        x.fill_(rank + 1)
        dist.all_reduce(x)
        checked(x, NR * (NR + 1) / 2, rank, i)
    x.fill_(rank + 1)
    dist.broadcast(x, 0)
    checked(x, 1.0, rank, 5)


def call6(dist, torch, mode, rank, x, async_op):
    """Call 6 as the mode has this rank make it; what it keeps alive."""
    if mode == "skip" and rank == 1:  # the all-reduce skipped: the job's next call
        outs = [torch.empty_like(x) for _ in range(NR)]
        return dist.all_gather(outs, x, async_op=async_op), outs
    y = torch.ones(1000, device=x.device) if mode == "count" and rank == 1 else x
    return dist.all_reduce(y, async_op=async_op), y


def die_with_launcher():
    """SIGKILL when the launcher ends (PR_SET_PDEATHSIG): a launcher killed
    at its step's limit leaves no rank behind spinning on the GPU."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(os.environ["P2PK_DESYNC_LAUNCHER"]):  # it ended before that
        os._exit(1)


def worker(mode, backend, timeout, reports, marks):
    die_with_launcher()
    rank = int(os.environ["RANK"])
    fr = backend != "p2pkit"
    if fr:  # p2pkit's own handler needs the signal untouched (SIG_DFL)
        signal.signal(signal.SIGUSR2, fr_handler(backend, reports, marks, rank))
    import torch
    import torch.distributed as dist
    kw = {}
    if backend == "p2pkit":
        import p2pkit  # noqa: F401 (registers "p2pkit")
    if backend != "gloo":
        torch.cuda.set_device(0)
        torch.empty(1, device="cuda")  # the CUDA context now, not inside the group's timeout
        kw["device_id"] = torch.device("cuda", 0)
    mark(marks, "up", rank)  # the ranks start the group together: the timeout bounds the
    await_marks(marks, "up", range(NR), rank)  # rendezvous, not torch's import
    dist.init_process_group({"p2pkit": "cuda:p2pkit"}.get(backend, backend),
                            timeout=datetime.timedelta(seconds=timeout), **kw)
    x = torch.empty(COUNT, device="cpu" if backend == "gloo" else "cuda")
    good_calls(dist, x, rank)
    mark(marks, "done5", rank)
    if mode == "die" and rank == 2:  # gone without a word once the others did call 5
        await_marks(marks, "done5", (0, 1), rank)
        os._exit(0)
    keep = None
    stops = mode in ("hang", "idle") and rank == 1
    if not stops:  # hang, idle: rank 1 skips call 6 and makes no other, in its own code
        keep = call6(dist, torch, mode, rank, x, async_op=backend == "gloo")
    mark(marks, "ready", rank)
    print(f"rank {rank}: pid {os.getpid()}, calls 1-5 right, call 6 "
          f"{'not made' if keep is None else 'made'}", flush=True)
    if fr or mode == "hang" or stops:
        idle(600)
    end = time.monotonic() + timeout + 30
    while time.monotonic() < end:
        p = own_report(reports, rank)
        if p:
            print(f"rank {rank}: report {os.path.basename(p)}", flush=True)
            os._exit(0)  # the communicator is dead: no teardown with its peers
        time.sleep(0.05)
    print(f"rank {rank}: no report in {reports} within {timeout + 30} s of call 6", flush=True)
    os._exit(1)


# ----------------------------------------------------------- the job ------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_env(a, reports):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(NR), GLOO_SOCKET_IFNAME="lo", PYTHONUNBUFFERED="1",
               P2PK_DESYNC_LAUNCHER=str(os.getpid()))
    if a.backend == "p2pkit":
        env.update(P2PKIT_SHARE_GPUS="1", P2PKIT_TRACE_DIR=reports,
                   P2PKIT_TRACE_SIGNAL="USR2" if a.mode == "hang" else "0")
        if a.handling is not None:
            env["P2PKIT_TORCH_ASYNC_ERROR_HANDLING"] = str(a.handling)
    elif a.backend == "nccl":
        env.update(NCCL_SOCKET_IFNAME="lo", TORCH_FR_BUFFER_SIZE="2000",
                   TORCH_NCCL_DUMP_ON_TIMEOUT="1", TORCH_NCCL_ENABLE_MONITORING="1",
                   TORCH_FR_DUMP_TEMP_FILE=os.path.join(reports, FR_PREFIX),
                   TORCH_NCCL_COORD_CHECK_MILSEC="200")
    return env


def spawn(a, root, reports, marks):
    """The ranks, each `python THIS --worker ...`, output to root/rank<r>.log."""
    env, procs = job_env(a, reports), []
    for r in range(NR):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        if a.backend == "nccl":
            e["NCCL_HOSTID"] = f"p2pkit-desync-host{r}"  # NCCL refuses two ranks on one GPU of one host
        with open(os.path.join(root, f"rank{r}.log"), "w") as log:
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", a.mode, a.backend,
                 str(a.timeout), reports, marks], env=e, stdout=log, stderr=subprocess.STDOUT))
    return procs


def dumped(cli, reports):
    """{rank: its report as `p2pkit trace --json` reads it} for every rank
    whose report reads whole (one being written reads as cut: a bad file,
    not the rank's yet)."""
    if not os.listdir(reports):
        return {}
    rc, out, _ = trace(cli, reports, as_json=True)
    try:
        doc = json.loads(out)
    except ValueError:
        return {}
    return {x["rank"]: x for c in doc.get("comms", []) for x in c["ranks"] if x.get("file")}


REASONS = re.compile(r"error: |p2pkit_comm_abort$|.* has not finished after ")


def rank_faults(mode, backend, handling, want, status, have):
    """What is wrong with the ranks' ends (exit statuses) and reports ({rank:
    `p2pkit trace --json`'s entry}): a rank of `want` without a report; on
    p2pkit, a report the mode's trigger did not write (hang: the signal;
    else the library's error, the abort, or the watchdog's finding through
    p2pkit_comm_dump_trace), a rank that did not end as it should."""
    out = [f"rank {r} left no report" for r in sorted(want) if r not in have]
    for r, rep in sorted(have.items()):
        if backend != "p2pkit":
            continue
        reason = rep.get("reason") or ""
        if mode == "hang" and reason != "signal SIGUSR2":
            out.append(f"rank {r}'s report says \"{reason}\", not the signal's")
        if mode == "hang":
            continue
        if not REASONS.match(reason):
            out.append(f"rank {r}'s report says \"{reason}\": not the library's error, the abort or "
                       "the watchdog's finding")
        ends = (0, 1) if handling in (1, 3) else (0,)  # 1, 3: the watchdog ends the process
        if status[r] not in ends:
            out.append(f"rank {r} exited {status[r]}, not {' or '.join(map(str, ends))}")
    return out


class Job:
    """One job's ranks from start to verdict (run())."""

    def __init__(self, a):
        self.a = a
        self.root = tempfile.mkdtemp(prefix=f"p2pk_tdesync_{a.backend}_{a.mode}.")
        self.reports = os.path.join(self.root, "reports")
        self.marks = os.path.join(self.root, "marks")
        os.mkdir(self.reports, 0o700)
        os.mkdir(self.marks, 0o700)
        self.procs = []
        self.status = [None] * NR
        self.asked = set()  # ranks sent SIGUSR2
        self.fail = []
        # the ranks that leave a report: every one but die's rank 2 and, on
        # p2pkit, idle's rank 1 (no call of its own fails, nothing dumps it)
        self.want = {r for r in range(NR) if not (a.mode == "die" and r == 2) and
                     not (a.mode == "idle" and a.backend == "p2pkit" and r == 1)}

    def reap(self):
        for r, p in enumerate(self.procs):
            if self.status[r] is None:
                self.status[r] = p.poll()  # reaped at once: a dead rank is gone, not a zombie

    def ask(self, ranks, why):
        for r in sorted(ranks - self.asked):
            if self.status[r] is None:
                print(f"rank {r}: SIGUSR2 ({why})")
                os.kill(self.procs[r].pid, signal.SIGUSR2)
        self.asked |= ranks

    def early_end(self, have):
        """A rank that ended before it was ready (die's rank 2 aside), or
        without its report: why, else None."""
        for r in sorted(self.want):
            if self.status[r] is None:
                continue
            if not marked(self.marks, "ready", r):
                return f"rank {r} ended ({self.status[r]}) before its call 6: see its log"
            if r not in have and (self.a.backend != "p2pkit" or self.a.mode == "hang"):
                return f"rank {r} ended ({self.status[r]}) without a report: see its log"
        return None

    def step(self, ready_at, have):
        """One look at the job; True when it is over."""
        a, now = self.a, time.monotonic()
        if a.backend == "p2pkit" and a.mode != "hang":  # each rank ends once it has its report
            return all(self.status[r] is not None for r in self.want)
        if ready_at is None:
            return False
        if have >= self.want:
            return True
        if a.backend == "gloo" or a.mode == "hang":
            if now - ready_at > 0.5:  # the calls enqueued, then the signal
                self.ask(self.want, "P2PKIT_TRACE_SIGNAL: the library dumps" if a.backend == "p2pkit"
                         else "this script's handler writes torch's dump")
        elif now - ready_at > a.timeout + 20:  # nccl: torch's timeout dumps came, or not
            self.ask(self.want - set(have), "no flight recorder dump on the timeout")
        return False

    def wait(self):
        t0, ready_at, have = time.monotonic(), None, {}
        while True:
            self.reap()
            have = dumped(self.a.cli, self.reports)
            late = self.early_end(have)
            if late:
                self.fail.append(late)
                return have
            if ready_at is None and all(marked(self.marks, "ready", r) for r in self.want):
                ready_at = time.monotonic()
            if self.step(ready_at, set(have)):
                return have
            if time.monotonic() - t0 > self.a.limit:
                self.fail.append(f"the job still runs after {self.a.limit} s (reports of ranks "
                                 f"{sorted(have)}; wanted {sorted(self.want)})")
                return have
            time.sleep(0.05)

    def stop(self):
        for r, p in enumerate(self.procs):
            if self.status[r] is None:
                p.kill()
                self.status[r] = p.wait()

    def check_ranks(self, have):
        for r in range(NR):
            rep = have.get(r)
            where = f"report {os.path.basename(rep['file'])}: {rep.get('reason')}" if rep else "no report"
            print(f"rank {r} (pid {self.procs[r].pid}): exit {self.status[r]}; {where}")
        self.fail += rank_faults(self.a.mode, self.a.backend, self.a.handling, self.want, self.status,
                                 have)

    def keep(self):
        if self.a.keep:
            os.makedirs(self.a.keep, mode=0o700, exist_ok=True)
            for p in glob.glob(os.path.join(self.reports, "*")):
                shutil.copy(p, self.a.keep)

    def logs(self):
        for r in range(NR):
            with open(os.path.join(self.root, f"rank{r}.log"), errors="replace") as f:
                for line in f.read().splitlines()[-40:]:
                    print(f"  r{r}| {line}")

    def run(self):
        try:
            return self.judged()
        finally:  # a launcher ended by SIGTERM too (the ranks end with it)
            shutil.rmtree(self.root, ignore_errors=True)

    def judged(self):
        a, t0 = self.a, time.monotonic()
        print(f"torch desync job: {a.mode} on {a.backend}, {NR} ranks"
              f"{'' if a.backend == 'gloo' else ' sharing GPU 0'}, timeout= {a.timeout} s")
        source = "p2pkit" if a.backend == "p2pkit" else "torch"
        try:
            self.procs = spawn(a, self.root, self.reports, self.marks)
            have = self.wait()
            culprit = self.procs[1 if a.mode == "idle" else 2].pid
            ok = judge(a.cli, self.reports, a.mode, source, pid=culprit)  # idle's rank 1 still runs
        finally:
            self.stop()
        have = dumped(a.cli, self.reports) or have
        self.logs()
        self.check_ranks(have)
        self.keep()
        ok = ok and not self.fail
        for f in self.fail:
            print(f"FAIL: {a.mode}: {f}")
        print(f"{'PASS' if ok else 'FAIL'}: {a.mode} on {a.backend} ({time.monotonic() - t0:.1f} s)")
        return 0 if ok else 1


# ------------------------------------------------------------ the command --

def parse(argv):
    ap = argparse.ArgumentParser(prog="torch_desync_case.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", help="skip | count | die | hang | idle")
    ap.add_argument("--backend", default="p2pkit", help="p2pkit (default) | nccl | gloo")
    ap.add_argument("--timeout", type=float, default=None,
                    help="the group's timeout= in seconds (default 5; hang 120)")
    ap.add_argument("--handling", type=int, default=None,
                    help="P2PKIT_TORCH_ASYNC_ERROR_HANDLING for the ranks (0-3; default: as set)")
    ap.add_argument("--keep", metavar="DIR", help="copy the job's reports into DIR")
    ap.add_argument("--cli", default=shutil.which("p2pkit") or "p2pkit", help="the p2pkit command")
    ap.add_argument("--limit", type=float, default=120.0, help="seconds the job may take (default 120)")
    ap.add_argument("--check", metavar="DIR", help="only judge the reports in DIR")
    ap.add_argument("--seq", type=int, default=SEQ, help=f"--check: the call that went wrong ({SEQ})")
    ap.add_argument("--before", default="broadcast", help="--check: hang: the call before it")
    a = ap.parse_args(argv)
    if a.mode not in MODES:
        ap.error(f"mode {a.mode!r}: one of {', '.join(MODES)}")
    if a.backend not in BACKENDS:
        ap.error(f"--backend {a.backend!r}: one of {', '.join(BACKENDS)}")
    if a.backend == "gloo" and a.mode == "count" and a.check is None:
        ap.error("count on gloo: gloo ends rank 1's process at the size mismatch "
                 "(gloo::EnforceNotMet) before it can dump; run count on p2pkit or nccl")
    if a.timeout is None:
        a.timeout = 120.0 if a.mode == "hang" else 5.0
    if not 1 <= a.timeout <= 3600:
        ap.error(f"--timeout {a.timeout:g}: from 1 to 3600 seconds")
    if a.handling is not None and not (0 <= a.handling <= 3 and a.backend == "p2pkit"):
        ap.error(f"--handling {a.handling}: 0 to 3, with --backend p2pkit")
    if not 10 <= a.limit <= 3600:
        ap.error(f"--limit {a.limit:g}: from 10 to 3600 seconds")
    if a.seq < 2:
        ap.error(f"--seq {a.seq}: 2 or more (the call that went wrong follows another)")
    if not re.fullmatch(r"[a-z_]+", a.before):
        ap.error(f"--before {a.before!r}: a collective's name (all_reduce, broadcast, ...)")
    if a.check is not None and not os.path.isdir(a.check):
        ap.error(f"--check {a.check!r}: not a directory")
    if not os.path.isfile(a.cli) and not shutil.which(a.cli):
        ap.error(f"--cli {a.cli!r}: no such command (the p2pkit CLI: build it, or install the wheel)")
    return a


def missing(backend):
    """Why this machine cannot run the job (None: it can)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return "SKIP: torch_desync_case: needs torch"
    if backend != "gloo" and torch.cuda.device_count() < 1:
        return f"SKIP: torch_desync_case: {backend} needs a CUDA GPU (torch sees none)"
    if backend == "gloo" and not dist.is_gloo_available():
        return "SKIP: torch_desync_case: this torch has no gloo"
    return None


def main(argv):
    if argv[:1] == ["--worker"] and len(argv) == 6:
        return worker(argv[1], argv[2], float(argv[3]), argv[4], argv[5])
    a = parse(argv)
    if a.check is not None:
        source = "p2pkit" if a.backend == "p2pkit" else "torch"
        ok = judge(a.cli, a.check, a.mode, source, a.seq, a.before)
        print(f"{'PASS' if ok else 'FAIL'}: {a.mode} ({a.backend}) in {a.check}")
        return 0 if ok else 1
    why = missing(a.backend)
    if why:
        print(why)
        return 77
    if a.backend == "p2pkit":  # the package the ranks import: the wheel's, or PYTHONPATH's
        try:
            from p2pkit import torch_backend as tb
        except ImportError as e:
            print(f"FAIL: {a.mode}: p2pkit does not import ({e}): install the wheel, or put a "
                  "package with the backend on PYTHONPATH")
            return 1
        if not tb.available():
            print(f"FAIL: {a.mode}: {tb.why_unavailable()}")
            return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a step's limit: clean up, then end
    return Job(a).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
