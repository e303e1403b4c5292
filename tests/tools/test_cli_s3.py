"""The CLI on an S3 warehouse (moto's server on the loopback interface): --warehouse s3://..., --catalog-dir and
--property, each command reaching the objects; secrets from the AWS_* environment stay off the command line."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tools.cli import main as cli


def test_the_cli_works_on_an_s3_warehouse(tmp_path: Path, s3_bucket: str, s3_properties: dict[str, str],
                                          monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_properties["s3.access-key-id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_properties["s3.secret-access-key"])
    base = ["--warehouse", f"s3://{s3_bucket}/lake", "--catalog-dir", str(tmp_path / "catalog"),
            "--property", f"s3.endpoint={s3_properties['s3.endpoint']}", "--property", "s3.region=us-east-1",
            "--property", "s3.path-style-access=true"]
    batch = tmp_path / "batch.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), batch)
    assert cli([*base, "create-namespace", "db"]) == 0
    assert cli([*base, "create-table", "db.t", "--schema-from", str(batch)]) == 0
    assert cli([*base, "append", "db.t", str(batch)]) == 0
    assert cli([*base, "delete", "db.t", "--where", "id = 2"]) == 0
    capsys.readouterr()
    assert cli([*base, "scan", "db.t"]) == 0
    out = capsys.readouterr().out
    assert "1" in out and "3" in out
    assert cli([*base, "verify", "db.t"]) == 0
    assert (tmp_path / "catalog" / "catalog.db").is_file()


def test_the_cli_refuses_an_s3_warehouse_without_a_catalog_dir_or_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli(["--warehouse", "s3://bucket/lake", "tables"]) == 1
    assert "not a local folder" in capsys.readouterr().err
    assert cli(["--warehouse", "s3://bucket/lake", "--catalog-dir", "cat", "create-namespace", "db"]) == 1
    assert "neither s3.endpoint nor credentials" in capsys.readouterr().err
    assert cli(["--warehouse", "s3://bucket/lake", "--catalog-dir", "cat", "--property", "novalue",
                "create-namespace", "db"]) == 1
    assert "expected KEY=VALUE" in capsys.readouterr().err
    assert not list(tmp_path.glob("s3*"))  # no local folder named after the URI
