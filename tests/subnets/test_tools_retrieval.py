"""``search``: BM25 over corpus sentences; the task-list example's questions retrieve the age sentences."""

import pytest

from subnets.base import ToolContext, ToolError
from subnets.registry import DEFAULT_CORPUS_DIR
from subnets.retrieval import load_corpus, make_search, tokenize

CTX = ToolContext(task_id="t", node_id="s", attempt=1, timeout_seconds=5.0)
SHIPPED = make_search(DEFAULT_CORPUS_DIR)


async def search(query: str, **extra):
    return (await SHIPPED({"query": query, **extra}, CTX)).output


@pytest.mark.parametrize(
    "query, sentence",
    [
        ("age of Emperor Wu of Han at death", "Emperor Wu of Han (156–87 BC) died in 87 BC at the age of 69."),
        (
            "age of Julius Caesar at death",
            "Julius Caesar (100–44 BC) died in Rome on 15 March 44 BC at the age of 55, stabbed by a group of senators.",
        ),
    ],
)
async def test_seed_004_queries_retrieve_the_age_sentences(query, sentence):
    output = await search(query)
    assert output.text == sentence
    top = output.artifacts.metadata["hits"][0]
    assert top["sentence"] == sentence and top["doc"] in {"emperor_wu_of_han", "julius_caesar"}


@pytest.mark.parametrize(
    "query, expected_doc, needle",
    [
        ("Who killed Caesar?", "julius_caesar", "Brutus"),
        ("Emperor Wu reign length", "emperor_wu_of_han", "54 years"),
        ("What is the capital of Australia", "sydney", "Canberra"),
        ("population of Berlin", "berlin", "3.7 million"),
        ("which elements did Marie Curie discover", "marie_curie", "polonium"),
        ("what does HTTP status 429 mean", "http_status_codes", "Too Many Requests"),
        ("difference between append and extend in Python lists", "python_lists", "extend"),
    ],
)
async def test_retrieval_finds_the_sentence_that_answers(query, expected_doc, needle):
    output = await search(query)
    assert output.artifacts.metadata["hits"][0]["doc"] == expected_doc
    assert needle in output.text


async def test_hits_are_k_best_first_with_doc_title_sentence_score():
    hits = (await search("Emperor Wu of Han", k=5)).artifacts.metadata["hits"]
    assert len(hits) == 5
    assert [set(hit) for hit in hits] == [{"doc", "title", "sentence", "score"}] * 5
    assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)
    assert hits[0]["title"] == "Emperor Wu of Han"


async def test_search_is_deterministic():
    first = await search("capital city population")
    assert await search("capital city population") == first


async def test_no_match_is_a_clean_failure():
    with pytest.raises(ToolError, match="nothing in the corpus matches"):
        await search("zyzzyva quux")


@pytest.mark.parametrize(
    "params, field",
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "the of and"}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 500}, "k"),
        ({"q": "x"}, "q"),
    ],
)
async def test_bad_params_name_the_field(params, field):
    with pytest.raises(ToolError, match=field):
        await SHIPPED(params, CTX)


def test_tokenize_folds_case_plurals_and_death_forms():
    assert tokenize("The Emperors' cities. Death, died!") == ["emperor", "city", "die", "die"]


def write_corpus(directory, docs):
    directory.mkdir()
    for stem, text in docs.items():
        (directory / f"{stem}.txt").write_text(text, encoding="utf-8")
    return directory


async def test_any_directory_can_be_a_corpus_and_titles_are_indexed(tmp_path):
    corpus = write_corpus(
        tmp_path / "c",
        {
            "ada": "Ada Lovelace\n\nShe wrote notes on the engine. She died young.",
            "bob": "Bob\n\nBob built an engine in a shed.",
        },
    )
    tool = make_search(corpus)
    output = (await tool({"query": "Lovelace engine"}, CTX)).output
    assert output.text == "She wrote notes on the engine."
    assert output.artifacts.metadata["hits"][0]["doc"] == "ada"


def test_corpus_is_loaded_once_per_directory(tmp_path):
    corpus = write_corpus(tmp_path / "c", {"a": "A\n\nOne sentence here."})
    assert load_corpus(corpus.resolve()) is load_corpus(corpus.resolve())


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: write_corpus(p / "empty", {})])
async def test_missing_or_empty_corpus_is_a_clean_failure(tmp_path, make):
    tool = make_search(make(tmp_path))
    with pytest.raises(ToolError, match="corpus directory"):
        await tool({"query": "anything"}, CTX)


def test_shipped_corpus_size():
    documents = list(DEFAULT_CORPUS_DIR.glob("*.txt"))
    assert 30 <= len(documents) <= 60
