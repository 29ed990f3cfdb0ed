import pytest

from posttrain.core.errors import ConfigError, NotFoundError
from posttrain.data.dataset import read_rows


def test_jsonl_csv_and_json_files_read_as_rows(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"prompt": "p1"}\n\n{"prompt": "p2"}\n')
    (tmp_path / "a.csv").write_text("prompt,reference\np1,r1\n")
    (tmp_path / "a.json").write_text('{"rows": [{"prompt": "p1"}]}')
    assert read_rows(tmp_path / "a.jsonl") == [{"prompt": "p1"}, {"prompt": "p2"}]
    assert read_rows(tmp_path / "a.csv") == [{"prompt": "p1", "reference": "r1"}]
    assert read_rows(tmp_path / "a.json") == [{"prompt": "p1"}]
    assert read_rows(tmp_path / "a.jsonl", limit=1) == [{"prompt": "p1"}]


def test_parquet_files_read_as_rows(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": ["p1", "p2"]}), tmp_path / "a.parquet")
    assert read_rows(tmp_path / "a.parquet") == [{"prompt": "p1"}, {"prompt": "p2"}]


def test_a_malformed_line_names_the_file_and_line(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"prompt": "ok"}\n{"prompt": \n')
    with pytest.raises(ConfigError, match=r"bad.jsonl line 2: not valid JSON"):
        read_rows(tmp_path / "bad.jsonl")


def test_a_missing_file_or_unknown_format_is_a_clear_error(tmp_path):
    with pytest.raises(NotFoundError, match="does not exist"):
        read_rows(tmp_path / "absent.jsonl")
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"unknown format '.txt'"):
        read_rows(tmp_path / "a.txt")
