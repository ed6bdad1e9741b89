"""`qmd embed` and `qmd doctor`: computing embeddings and checking the model set-up."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from adapters.cli.errors import CommandError
from adapters.cli.grammar import CommandTable, chunk_strategy, non_negative_int, positive_int
from adapters.cli.runtime import (
    err,
    index_lock,
    maintenance,
    open_app,
    out,
)
from adapters.storage.registry import kind_named

if TYPE_CHECKING:
    pass


def embed_progress_line(
    done: int, total: int, chunks: int, elapsed: float, eta_s: float | None, width: int = 20
) -> str:
    """`Embedding [#####-----] 120/240 docs, 512 chunks, 8.1 chunks/s, ETA 0:42`; the ETA
    comes from the measured throughput (domain/eta.py), `?` until there is one."""
    from domain.eta import format_eta

    filled = 0 if total <= 0 else min(width, (done * width) // total)
    rate = chunks / elapsed if elapsed > 0 else 0.0
    return (
        f"Embedding [{'#' * filled}{'-' * (width - filled)}] {done}/{total} docs, "
        f"{chunks} chunks, {rate:.1f} chunks/s, ETA {format_eta(eta_s)}"
    )


def embed(args: argparse.Namespace) -> int:
    import time

    from domain.chunking import CHUNK_SIZE_TOKENS
    from domain.errors import UNAVAILABLE, QmdError
    from domain.eta import ThroughputEta
    from domain.usecases.embedding import EmbedIndex, EmbedOptions, EmbedProgress

    collection: str | None = (args.collection or [None])[0]
    if collection is not None and args.force:
        raise CommandError(
            "qmd embed -f -c: not supported: -f forgets the vectors of every collection (they "
            "belong to contents that collections share); run 'qmd embed -f' without -c."
        )
    with open_app(args, with_models=True) as app:
        embedder = app.models.embedder
        # the lock first: a run that cannot write loads no model
        with index_lock(app, "embed", False) as (locked, holder):
            if not locked:
                # Nothing was embedded by this run: say so and fail (tobi/qmd #724, #935).
                err(
                    "Another embed process is already running; this run embedded nothing. "
                    f"It embeds the index {app.index_display} ({holder}). "
                    "Run 'qmd embed' again when it has finished.\n"
                )
                return 1
            if embedder is None:
                raise CommandError(
                    "qmd embed: llama-cpp-python is not installed, so no embedding model can "
                    "run. Install it with scripts/install_llama.sh."
                )
            use_case = EmbedIndex(
                app.store,
                app.vectors,
                embedder,
                app.clock,
                EmbedOptions(
                    collection=collection,
                    # QMD_FIT_CHUNKS=0: the original's 900-token chunks whatever the model
                    # reads, for indexes compared chunk for chunk with the original's
                    fit_chunks=os.environ.get("QMD_FIT_CHUNKS", "1").strip() != "0",
                    # vectors stored under another path to this model's file are current
                    same_model=app.models.same_model,
                ),
            )
            if collection is not None and app.store.get_collection(collection) is None:
                raise CommandError(f"Collection not found: {collection}")
            pending = len(use_case.pending(collection))
            if args.force:  # -f forgets every vector first, so every body is embedded again
                pending = len({meta.hash for meta in app.store.documents()})
            if not pending and not args.force:
                out("✓ All documents are embedded.\n")
                return 0
            again = " again (-f)" if args.force else ""
            out(f"Embedding {pending} document(s){again} with {use_case.model}\n")
            started = time.monotonic()
            deadline = started + args.timeout * 60 if args.timeout else None
            live = sys.stderr.isatty()

            estimates: list[ThroughputEta] = []

            def report(progress: EmbedProgress) -> None:
                elapsed = time.monotonic() - started
                if live:
                    if not estimates:
                        estimates.append(ThroughputEta(progress.total_chars))
                    estimates[0].observe(progress.done_chars, elapsed)
                    line = embed_progress_line(
                        progress.done_documents,
                        progress.total_documents,
                        progress.embedded_chunks,
                        elapsed,
                        estimates[0].remaining_s(),
                    )
                    sys.stderr.write("\r\x1b[K" + line)
                    sys.stderr.flush()
                if deadline is not None and time.monotonic() > deadline:
                    raise QmdError(
                        UNAVAILABLE,
                        f"Stopped after {args.timeout} minute(s) (--timeout); "
                        "run 'qmd embed' again to continue.",
                    )

            batch_bytes = args.max_batch_mb * 1024 * 1024 if args.max_batch_mb else None
            options: dict[str, int] = {}
            if args.max_docs_per_batch:
                options["batch_docs"] = args.max_docs_per_batch
            if batch_bytes:
                options["batch_bytes"] = batch_bytes
            try:
                result = use_case.run(force=args.force, progress=report, **options)
            finally:
                if live:
                    sys.stderr.write("\r\x1b[K")
                    sys.stderr.flush()
            elapsed = time.monotonic() - started
            rate = result.embedded_chunks / elapsed if elapsed > 0 else 0.0
            out(
                f"✓ Embedded {result.embedded_chunks} chunks from "
                f"{result.embedded_documents} documents in {elapsed:.1f}s "
                f"({rate:.1f} chunks/s, model {result.model}, fingerprint {result.fingerprint})\n"
            )
            if result.input_limit is not None and result.chunk_tokens < CHUNK_SIZE_TOKENS:
                out(
                    f"Chunks of at most {result.chunk_tokens} tokens: the model reads "
                    f"{result.input_limit} tokens per text.\n"
                )
            if result.truncated_chunks:
                err(
                    f"Warning: {result.truncated_chunks} chunk(s) were still longer than the "
                    f"model's {result.input_limit}-token input (a long title?) and were cut."
                )
            for error in result.errors:
                err(f"{error}\n")
            if result.failed_documents or result.left_pending:
                err(
                    f"Embedding incomplete: {result.left_pending} document(s) still need "
                    f"embedding ({result.failed_documents} of this run's "
                    f"{result.pending_documents} failed; the others changed while it ran); "
                    "run 'qmd embed' again to retry.\n"
                )
                return 1
            return 0


def remote_state(entry: dict[str, object]) -> str:
    """One doctor line for a remote model: where, with which key variable, and what works."""
    key = f"key from {entry['key']}" if entry.get("key") else "no key"
    if not entry.get("available"):
        return f"UNAVAILABLE — {entry.get('error')} ({key})"
    facts = [f"ok at {entry.get('url')}", key]
    if entry.get("listed") is None:
        facts.append("the server lists no models")
    if entry.get("dimensions"):
        facts.append(f"{entry['dimensions']} dimensions")
    return "; ".join(facts)


def doctor(args: argparse.Namespace) -> int:
    from adapters.cli.commands.health import (
        active_model_refs,
        embedding_freshness,
        environment_overrides,
    )
    from adapters.cli.commands.index import leftover_lines
    from adapters.models.llama import describe_backend
    from adapters.models.references import ModelResolver, is_remote_ref, model_cache_dir
    from adapters.models.remote import check_endpoint

    lines = ["QMD Doctor", ""]
    healthy = True
    with open_app(args) as app:
        lines.append(f"  Index:      {app.index_display}")
        kind = kind_named(app.backend)
        lines.append(f"  Backend:    {kind.label}")
        config_state = "present" if os.path.exists(app.config_path) else "missing"
        lines.append(f"  Config:     {app.config_path} ({config_state})")
        upkeep = maintenance(app)
        lines.append(f"  Documents:  {upkeep.total_documents()}")
        lines.append(f"  Ranking:    {upkeep.lexical_ranking}")
        vec = upkeep.vec_available
        healthy &= vec
        state = kind.vector_ready if vec else "not available"
        lines.append(f"  {kind.vector_extension + ':':<11} {state}")
        refs = active_model_refs(app)
        checks = environment_overrides(os.environ)
        freshness, next_steps = embedding_freshness(app, app.status.status())
        checks += freshness
        leftovers = leftover_lines(app.db_path)  # REQ-INDEX-COPY-STALE-001
        if leftovers:
            checks += leftovers
            next_steps.append("Run `qmd index tidy` to remove what unfinished copies left.")
    info = describe_backend(
        refs,
        resolver=ModelResolver(model_cache_dir(os.environ)),
        force_cpu=bool(args.no_gpu),
    )
    remote_roles = {role for role, ref in refs.items() if is_remote_ref(ref)}
    for role in remote_roles:
        # Each endpoint is asked: reachable, model listed, and the embedding dimension.
        info["models"][role] = {
            **check_endpoint(refs[role], role, os.environ),
            "env": info["models"][role]["env"],
        }
    if len(remote_roles) == len(refs):
        lines.append("  llama.cpp:  not needed (every model is remote)")
    elif info.get("llama_cpp"):
        backend = "GPU offload" if info.get("gpu_used") else "CPU"
        support = "supported" if info.get("gpu_offload") else "not built in"
        lines.append(
            f"  llama.cpp:  llama-cpp-python {info['llama_cpp']} ({backend}; GPU {support})"
        )
    else:
        healthy = False
        lines.append(f"  llama.cpp:  not available: {info.get('error', 'unknown error')}")
    lines.append(f"  Model cache: {info.get('cache_dir')}")
    for role, entry in info.get("models", {}).items():
        if entry.get("remote"):
            healthy &= bool(entry.get("available"))
            lines.append(f"  {role:<8} {entry['reference']}: {remote_state(entry)}")
            continue
        if entry.get("available"):
            state = f"ok ({entry.get('path')})"
        else:
            healthy = False
            state = f"MISSING — {entry.get('error') or 'not downloaded'}; set {entry['env']} "
            state += "or models: in index.yml"
        lines.append(f"  {role:<8} {entry['reference']}: {state}")
        if not entry.get("available"):
            missing = (
                f"Run `qmd pull` to fetch the {role} model, or point {entry['env']} at a file."
            )
            next_steps.append(missing)
    lines += ["", *checks]
    if next_steps:
        lines += ["", "Recommended next steps", *(f"  - {step}" for step in next_steps)]
    out("\n".join(lines) + "\n")
    return 0 if healthy else 1


def register(table: CommandTable) -> None:
    embedding = table.command("embed", embed, "generate vector embeddings")
    embedding.add_argument("-f", "--force", action="store_true", help="re-embed everything")
    embedding.add_argument("-c", "--collection", action="append", metavar="NAME")
    embedding.add_argument("--max-docs-per-batch", type=positive_int, metavar="N")
    embedding.add_argument("--max-batch-mb", type=positive_int, metavar="N")
    embedding.add_argument("--chunk-strategy", type=chunk_strategy, metavar="regex")
    embedding.add_argument("--timeout", type=non_negative_int, metavar="MIN")
    table.command("doctor", doctor, "diagnose models and index")
