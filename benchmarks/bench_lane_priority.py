"""How long does a request thread wait for a core while a model call computes beside it?

A Python thread wakes every 0.5 ms and records how late it ran (what a `get` handler feels),
while another thread of the same process evaluates a 1,500-token prompt with the Gemma 270M
test model (llama.cpp, as many compute threads as cores): once with the model thread at the
process's own niceness ("level", what a server started under `nice -n 10` got while the model
lane set an absolute niceness of 10), once 10 steps lower ("niced", the model lane now). The
two modes alternate `--rounds` times. It also times `set_batch`, the pure-Python part of a
llama-cpp-python eval that holds the GIL, to tell GIL waits from CPU waits.

    python -m benchmarks.bench_lane_priority [--rounds 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / ".models" / "gemma-3-270m-q4_k_m.gguf"
STEP = 10


def _one(mode: str) -> dict[str, Any]:
    import llama_cpp

    llm: Any = llama_cpp.Llama(model_path=str(MODEL), n_ctx=4096, verbose=False)
    tokens = llm.tokenize(b"the quick brown fox jumps over the lazy dog " * 200)[:1500]
    began = time.perf_counter()
    llm._batch.set_batch(batch=tokens[:512], n_past=0, logits_all=False)
    set_batch_ms = (time.perf_counter() - began) * 1000
    gaps: list[float] = []
    stop = threading.Event()

    def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.0005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    def model() -> None:
        if mode == "niced":
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + STEP)
        for _ in range(3):
            llm.reset()
            llm.eval(tokens)

    tick = threading.Thread(target=ticker)
    tick.start()
    work = threading.Thread(target=model)
    work.start()
    work.join()
    stop.set()
    tick.join()
    gaps.sort()

    def pct(p: float) -> float:
        return round(gaps[min(len(gaps) - 1, int(len(gaps) * p))] * 1000, 2)

    return {
        "mode": mode,
        "samples": len(gaps),
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
        "set_batch_512_ms": round(set_batch_ms, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--mode", choices=("level", "niced"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:  # one measurement, in a fresh process
        print(json.dumps(_one(args.mode)))
        return 0
    results = []
    for _ in range(args.rounds):
        for mode in ("level", "niced"):
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_lane_priority", "--mode", mode],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            print(
                f"  {mode:6} wake-up delay p50 {result['p50_ms']:6.2f} ms  p99 "
                f"{result['p99_ms']:6.2f} ms  p99.9 {result['p999_ms']:6.2f} ms  "
                f"(set_batch of 512 tokens holds the GIL {result['set_batch_512_ms']} ms)",
                file=sys.stderr,
            )
    load = os.getloadavg()[0]
    report = {"machine": f"{os.cpu_count()} cores, load average {load:.1f}", "runs": results}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
