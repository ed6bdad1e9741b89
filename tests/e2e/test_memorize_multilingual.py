"""Seed 004's memory in Chinese with a multilingual embedder (issue 34, REQ-MEM-CAL-004): a real
`qmd mcp --surface memorize` process with the real EmbeddingGemma-300M, driven by the official
MCP client. "Python 打包" reuses the topic "Python打包" (0.94 similar: the strict fallback,
0.95, refused it before EmbeddingGemma was calibrated), cooking does not join it, and
`query_qa` with a Chinese paraphrase of the question and of the topic finds the stored answer.
With MiniLM the same calls keep refusing CJK reuse (tests/e2e/test_memorize_calibration.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from tests.e2e.test_memorize_e2e import stdio_params, structured
from tests.mcp_harness import REPO, fixture_env
from tests.model_fakes import real_prepared_model

pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.real_models]

UPLOAD = ("怎么把包上传到 PyPI？", "先 python -m build，再 twine upload dist/*。")
VERSION = ("发布新版本前要改哪里？", "改 pyproject.toml 里的 version，再重新构建上传。")
EGG = ("溏心蛋要煮几分钟？", "水开后煮六分半钟。")


def gemma_env(root: Path) -> dict[str, str]:
    model = real_prepared_model("embed")
    (root / "home").mkdir(parents=True, exist_ok=True)
    env = fixture_env(root)
    env.update(QMD_EMBED_MODEL=str(model), QMD_MEMORY_DIR=str(root / "memory"))
    return env


async def store(client: Client, pair: tuple[str, str], topic: str) -> dict[str, Any]:
    args = {"question": pair[0], "answer": pair[1], "topic": topic}
    return structured(await client.call_tool("store_qa", args))


async def test_chinese_topics_are_reused_and_found_by_meaning(tmp_path: Path) -> None:
    async with Client(stdio_params(gemma_env(tmp_path))) as client:
        upload = await store(client, UPLOAD, "Python打包")
        assert upload["topic"]["reused"] is False
        assert upload["thresholds"]["calibratedFor"] == "embeddinggemma-300M-Q8_0.gguf"
        assert upload["thresholds"]["topic"] == 0.60

        version = await store(client, VERSION, "Python 打包")
        assert version["topic"]["name"] == "Python打包", version
        assert version["topic"]["reused"] is True
        assert 0.60 <= version["topic"]["similarity"] < 1.0  # by meaning, not by name

        egg = await store(client, EGG, "烹饪")
        assert egg["topic"]["name"] == "烹饪" and egg["topic"]["reused"] is False

        found = structured(
            await client.call_tool(
                "query_qa",
                {"question": "我写的库要怎么发布到 PyPI 上？", "context": "把 Python 项目打包发布"},
            )
        )
        assert found["topic"] == "Python打包", found
        assert found["answers"][0]["id"] == upload["id"], found
        assert found["answers"][0]["answer"] == UPLOAD[1]
        assert {a["id"] for a in found["answers"]} == {upload["id"], version["id"]}

        cooking = structured(
            await client.call_tool("query_qa", {"question": "鸡蛋煮多久？", "context": "做饭"})
        )
        assert cooking["topic"] == "烹饪" and cooking["answers"][0]["id"] == egg["id"]


def test_the_calibration_in_the_code_is_the_benchmarks_choice_for_embedding_gemma() -> None:
    """bench_memorize_fusion --check with EmbeddingGemma: its thresholds, English and CJK, and
    its multilingual flag in domain/memory.py are what the rule picks on the labelled sets."""
    model = real_prepared_model("embed")
    bench = [sys.executable, "-m", "benchmarks.bench_memorize_fusion", "--check"]
    done = subprocess.run(
        [*bench, "--model", str(model)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "topics, CJK      | rule 0.60     | in force 0.60: precision 0.975" in done.stdout
    assert "multilingual     | rule yes      | in force yes" in done.stdout
