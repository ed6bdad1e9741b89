"""Where does "relevant" end for the LDIMS surface's semantic mode? Calibrates its floor.

    nice -n 10 .venv/bin/python -m benchmarks.bench_ldims_floor
    nice -n 10 .venv/bin/python -m benchmarks.bench_ldims_floor --model PATH.gguf

The fixture handbook (fixtures/corpora/handbook) is indexed and embedded with the project's
test embedding model (the MiniLM GGUF of scripts/prepare_models.py), then two labelled sets of
questions are asked through the hybrid search the LDIMS surface runs:

* relevant: questions about one handbook page, worded without its key terms where possible;
  what counts is the cosine similarity of the question to that page (its best chunk);
* unrelated: questions no handbook page answers (cooking, astronomy, gibberish); what counts
  is the best similarity to any page.

Printed: every question's similarity, then for floors from 0.20 to 0.60 how many relevant
pages keep their place (recall) and how many unrelated questions still find something (false
hits). The floor in adapters/mcp/ldims.py (SEMANTIC_FLOOR, marked `*`) sits in the gap.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from adapters.bootstrap import build_app
from adapters.mcp.ldims import SEMANTIC_FLOOR
from domain.profiles import SEED_000
from domain.usecases.embedding import EmbedIndex
from domain.usecases.search import SearchRequest

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "fixtures" / "corpora" / "handbook"
MODEL = REPO / ".models" / "all-MiniLM-L6-v2-f16.gguf"
FLOORS = [round(0.20 + 0.05 * i, 2) for i in range(9)]

RELEVANT = {
    "How many calls per minute may one client key make?": "engineering/api/rate limits.md",
    "throttling of API clients": "engineering/api/rate limits.md",
    "How long does a login credential stay valid?": "engineering/api/authentication.md",
    "How do I fetch the next page of a long list?": "engineering/api/pagination.md",
    "Why did the indexer stop in March?": (
        "engineering/runbooks/incidents/2026/outage-2026-03-14.md"
    ),
    "what did the team decide at the January planning meeting": ("meetings/2026-01-12 planning.md"),
    "write-through versus write-back cache": "engineering/caching strategy.md",
    "the layers of the search service": "engineering/architecture.md",
}
UNRELATED = [
    "chocolate cake recipe with buttercream frosting",
    "how far away is the Andromeda galaxy",
    "zxqv blorptastic flumwhistle",
    "best hiking trails in the Swiss Alps",
    "symptoms of vitamin D deficiency",
    "who won the 1998 football world cup",
    "knitting a wool scarf for beginners",
    "qwerty asdf zxcv uiop",
]


def _similarities(query: str, searcher: object) -> dict[str, float]:
    """The question's cosine similarity to each page its own vector list found."""
    results = searcher.hybrid_query(  # type: ignore[attr-defined]
        query, SearchRequest(limit=50, candidate_limit=50, rerank=False, expand=False, explain=True)
    )
    found: dict[str, float] = {}
    for result in results:
        own = [
            c.backend_score
            for c in result.explanation.contributions
            if c.source == "vec" and c.query_type == "original"
        ]
        found[result.document.meta.path] = max(own, default=0.0)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(MODEL), help="embedding model (GGUF)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))},
            "HOME": scratch,
            "INDEX_PATH": f"{scratch}/index.sqlite",
            "QMD_CONFIG_DIR": f"{scratch}/config",
            "QMD_EMBED_MODEL": args.model,
        }
        app = build_app(env=env, with_models=True)
        try:
            app.collections.add(str(CORPUS), "handbook")
            embedder = app.models.embedder
            assert embedder is not None, "no embedding model"
            EmbedIndex(app.store, app.vectors, embedder, app.clock).run()
            searcher = app.searcher.with_profile(SEED_000)
            relevant = {q: _similarities(q, searcher).get(p, 0.0) for q, p in RELEVANT.items()}
            unrelated = {
                q: max(_similarities(q, searcher).values(), default=0.0) for q in UNRELATED
            }
        finally:
            app.close()
    print(f"model: {Path(args.model).name}\n")
    print("relevant question -> similarity to its page")
    for query, score in relevant.items():
        print(f"  {score:.3f}  {query}")
    print("unrelated question -> best similarity to any page")
    for query, score in unrelated.items():
        print(f"  {score:.3f}  {query}")
    print("\nfloor  recall  false hits")
    for floor in sorted({*FLOORS, SEMANTIC_FLOOR}):
        kept = sum(score >= floor for score in relevant.values())
        false = sum(score >= floor for score in unrelated.values())
        mark = "*" if floor == SEMANTIC_FLOOR else " "
        print(f"{mark}{floor:.2f}  {kept}/{len(relevant)}     {false}/{len(unrelated)}")
    print(
        f"\nlowest relevant {min(relevant.values()):.3f}, "
        f"highest unrelated {max(unrelated.values()):.3f}"
    )


if __name__ == "__main__":
    main()
