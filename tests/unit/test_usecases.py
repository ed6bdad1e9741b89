"""Use cases over fakes wired through the composition root: the rules the end-to-end tier
exercises only indirectly — how `get` resolves a reference, when collections conflict, and the
default surface's any-term fill — pinned below it."""

from __future__ import annotations

import unicodedata
from dataclasses import replace

import pytest

from adapters.bootstrap import App
from domain.errors import (
    CONFLICT,
    EXCLUDED,
    INVALID_ARGUMENT,
    NOT_FOUND,
    DocumentNotFoundError,
    QmdError,
)
from domain.profiles import COMMAND_LINE, COMMAND_LINE_STRICT, ORIGINAL_2_8_3, SEED_000
from domain.usecases.search import SearchRequest
from tests.fakes import FakeContentSource, FixedClock, InMemoryConfigRepository, InMemoryStore

NOTES = {
    "/n/readme.md": "# Readme\n\nThe notes collection.\n",
    "/n/api/auth.md": "# Auth\n\nTokens expire after an hour.\n",
    "/n/api/AUTH-Guide.md": "# Guide\n\nHow to sign in.\n",
    "/n/journal/2025-01.md": "# January\n\nRate limits were raised.\n",
    "/n/drafts/secret.md": "# Draft\n\nNot ready.\n",
}
OTHER = {"/o/readme.md": "# Other readme\n\nAnother collection.\n"}


def _app(files: dict[str, str] | None = None) -> App:
    store = InMemoryStore()
    return App(
        store=store,
        lexical=store,
        vectors=store,
        cache=store,
        config=InMemoryConfigRepository(),
        source=FakeContentSource(files if files is not None else {**NOTES, **OTHER}),
        clock=FixedClock(),
        maintenance=store,
        home="/n",
    )


@pytest.fixture
def app() -> App:
    app = _app()
    app.collections.add("/n", "notes")
    app.collections.add("/o", "other")
    return app


# -- Retrieval.find: the original's resolution order --------------------------------------


def test_find_resolves_every_kind_of_reference(app: App) -> None:
    find = app.retrieval.find
    auth = find("notes/api/auth.md")
    assert (auth.collection, auth.path) == ("notes", "api/auth.md")
    assert find("qmd://notes/api/auth.md") == auth  # virtual path
    assert find(f"#{auth.docid}") == auth  # docid with #
    assert find(auth.docid.upper()) == auth  # bare docid, any case
    assert find("/n/api/auth.md") == auth  # absolute path inside the collection folder
    assert find("~/api/auth.md") == auth  # `~` is the home folder (here /n)
    assert find("api/auth.md:3") == auth  # a line suffix is not part of the path
    assert find("journal/2025-01.md").path == "journal/2025-01.md"  # collection-relative


def test_an_exact_virtual_path_wins_over_a_suffix_match(app: App) -> None:
    # "readme.md" exists in both collections; the virtual path names one exactly.
    assert app.retrieval.find("qmd://other/readme.md").collection == "other"
    assert app.retrieval.find("qmd://notes/readme.md").collection == "notes"


def test_an_encoded_uri_is_decoded_only_when_asked_and_after_the_literal_name() -> None:
    """REQ-SPEC-GET-URI-001: the default surface's `get` takes the URIs it hands out."""
    app = _app({"/n/issue #42 notes.md": "# spaced\n", "/n/50%25 off.md": "# literal\n"})
    app.collections.add("/n", "notes")
    encoded = "qmd://notes/issue%20%2342%20notes.md"
    assert app.retrieval.find(encoded, encoded_uris=True).path == "issue #42 notes.md"
    with pytest.raises(DocumentNotFoundError):
        app.retrieval.find(encoded)  # the original's literal lookup (compat)
    # a name that holds `%25` itself is found as written, never as `50% off.md`
    assert app.retrieval.find("qmd://notes/50%25 off.md", encoded_uris=True).path == (
        "50%25 off.md"
    )


def test_a_name_stored_decomposed_is_found_typed_composed() -> None:
    """REQ-SPEC-GET-NFC-001: macOS wrote `café.md` decomposed (NFD); people type it
    composed (NFC). Before, `qmd get notes/café.md` suggested unrelated names."""
    decomposed = unicodedata.normalize("NFD", "café.md")
    app = _app({f"/n/{decomposed}": "# Café\n", "/n/plain.md": "# plain\n"})
    app.collections.add("/n", "notes")
    composed = unicodedata.normalize("NFC", "notes/café.md")
    assert composed != f"notes/{decomposed}"
    assert app.retrieval.find(composed, unicode_forms=True).path == decomposed
    assert app.retrieval.find(f"qmd://{composed}", unicode_forms=True).path == decomposed
    with pytest.raises(DocumentNotFoundError):
        app.retrieval.find(composed)  # the original's exact lookup (compat)


def test_suffix_match_is_ascii_case_insensitive(app: App) -> None:
    assert app.retrieval.find("api/auth-guide.md").path == "api/AUTH-Guide.md"


def test_a_miss_suggests_close_paths_and_an_empty_reference_is_invalid(app: App) -> None:
    with pytest.raises(DocumentNotFoundError) as missed:
        app.retrieval.find("api/auht.md")
    assert "api/auth.md" in missed.value.suggestions
    with pytest.raises(DocumentNotFoundError):
        app.retrieval.find("#000000")
    with pytest.raises(QmdError) as empty:
        app.retrieval.find("   ")
    assert empty.value.code == INVALID_ARGUMENT


def test_an_ignored_file_says_which_rule_excludes_it(app: App) -> None:
    notes = app.collections.get("notes")
    app.store.put_collection(replace(notes, ignore=("drafts/**",)))
    with pytest.raises(QmdError) as excluded:
        app.retrieval.find("notes/drafts/missing.md")
    assert excluded.value.code == EXCLUDED
    assert "Ignore rule: drafts/**" in excluded.value.message


# -- CollectionManager: conflicts ----------------------------------------------------------


def test_collection_conflicts(app: App) -> None:
    manager = app.collections
    with pytest.raises(QmdError) as taken:
        manager.add("/o", "notes")
    assert taken.value.code == CONFLICT
    with pytest.raises(QmdError) as same_folder:
        manager.add("/n/", "again")  # the same folder and pattern under another name
    assert same_folder.value.code == CONFLICT
    assert "notes" in same_folder.value.message
    manager.add("/n", "markdown-only-api", pattern="api/**/*.md")  # another mask is fine
    with pytest.raises(QmdError) as rename_taken:
        manager.rename("other", "notes")
    assert rename_taken.value.code == CONFLICT
    with pytest.raises(QmdError) as bad_name:
        manager.rename("other", "a/b")
    assert bad_name.value.code == INVALID_ARGUMENT
    with pytest.raises(QmdError) as missing:
        manager.remove("nonesuch")
    assert missing.value.code == NOT_FOUND
    with pytest.raises(QmdError) as not_a_folder:
        manager.add("/nowhere", "x")
    assert not_a_folder.value.code == NOT_FOUND
    assert {c.name for c in manager.list()} == {"notes", "other", "markdown-only-api"}


@pytest.mark.parametrize("name", ["..", ".", "a\nb", "tab\there", "del\x7f", "c1\x85"])
def test_names_that_break_paths_or_listings_are_refused(app: App, name: str) -> None:
    """Before: `qmd collection rename other $'a\\nb'` was taken, and every listing that
    printed the name was split in two; `..` made `qmd://../x.md` paths."""
    with pytest.raises(QmdError) as renamed:
        app.collections.rename("other", name)
    assert renamed.value.code == INVALID_ARGUMENT
    with pytest.raises(QmdError) as added:
        app.collections.add("/o", name, pattern="**/*.txt")
    assert added.value.code == INVALID_ARGUMENT
    assert {c.name for c in app.collections.list()} == {"notes", "other"}
    app.collections.rename("other", "spaced name ü #1")  # any other text is a name


# -- the lexical rule of a profile ---------------------------------------------------------


def test_any_term_fill_comes_after_all_term_matches() -> None:
    app = _app(
        {
            "/d/both.md": "# Both\n\nrate limits for tokens\n",
            "/d/rate.md": "# Rate\n\nthe rate only\n",
            "/d/limits.md": "# Limits\n\nlimits only\n",
            "/d/none.md": "# None\n\nnothing here\n",
        }
    )
    app.collections.add("/d", "d")
    request = SearchRequest(limit=10)
    strict = app.searcher.with_profile(ORIGINAL_2_8_3).lex_search("rate limits", request)
    assert [r.document.meta.path for r in strict] == ["both.md"]
    seed = app.searcher.with_profile(SEED_000)
    relaxed = seed.lex_search("rate limits", request)
    paths = [r.document.meta.path for r in relaxed]
    assert paths[0] == "both.md"
    assert set(paths[1:]) == {"rate.md", "limits.md"}
    # the fill never pads past the limit, and a one-term query has nothing to fill
    assert (
        len(app.searcher.with_profile(SEED_000).lex_search("rate limits", SearchRequest(limit=2)))
        == 2
    )
    single = app.searcher.with_profile(SEED_000).lex_search("rate", request)
    assert {r.document.meta.path for r in single} == {"both.md", "rate.md"}


def test_fill_results_are_marked_partial_and_all_term_matches_are_not() -> None:
    """REQ-SPEC-SEARCH-006: what the fill added says so; the every-term rules never fill."""
    app = _app(
        {
            "/d/both.md": "# Both\n\nrate limits for tokens\n",
            "/d/rate.md": "# Rate\n\nthe rate only\n",
            "/d/limits.md": "# Limits\n\nlimits only\n",
        }
    )
    app.collections.add("/d", "d")
    for profile in (SEED_000, COMMAND_LINE):
        results = app.searcher.with_profile(profile).lex_search("rate limits", SearchRequest())
        marks = {r.document.meta.path: r.partial for r in results}
        assert marks == {"both.md": False, "rate.md": True, "limits.md": True}
    for profile in (ORIGINAL_2_8_3, COMMAND_LINE_STRICT):
        strict = app.searcher.with_profile(profile).lex_search("rate limits", SearchRequest())
        assert [(r.document.meta.path, r.partial) for r in strict] == [("both.md", False)]


def test_results_come_in_descending_score_order_with_all_term_matches_first() -> None:
    # a short one-term document outscores a long all-terms one in raw BM25
    long_body = "rate limits " + " ".join(f"filler{i}" for i in range(300))
    app = _app(
        {
            "/d/both.md": f"# Both\n\n{long_body}\n",
            "/d/rate.md": "# Rate\n\nrate rate rate rate\n",
        }
    )
    app.collections.add("/d", "d")
    for profile in (SEED_000, COMMAND_LINE):
        results = app.searcher.with_profile(profile).lex_search("rate limits", SearchRequest())
        assert [r.document.meta.path for r in results] == ["both.md", "rate.md"]
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True) and scores[1] < scores[0]
    strict = app.searcher.with_profile(COMMAND_LINE_STRICT)
    assert [r.document.meta.path for r in strict.lex_search("rate limits", SearchRequest())] == [
        "both.md"
    ]
