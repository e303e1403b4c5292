"""The main job (the README's first command) runs end to end on a small day and its numbers add up."""

from __future__ import annotations

from tools.demo import events_frame, run_demo


def test_the_pipeline_commits_through_the_log_and_spark_agrees(spark, tmp_path):
    rows = 4000
    result = run_demo(str(tmp_path / "warehouse"), rows=rows, spark=spark)
    day_start_s = 1_763_596_800
    late_bots = events_frame(spark, rows, 500, day_start_s + 23 * 3600, 3600).where("event_type = 'bot'").count()
    bots = result["bots_after_ingest"] + late_bots
    assert result["rows_after_ingest"] == rows and result["bots_after_ingest"] > 0
    # the three snapshots expire_snapshots kept: MERGE (+500 late events), DELETE of bots, compaction
    assert list(result["snapshot_rows"].values()) == [rows + 500, rows + 500 - bots, rows + 500 - bots]
    # create, 4 ingests, MERGE, DELETE, ALTER (schema added + made current), compaction, expiry
    assert result["log_events"] == 11


def test_the_demo_refuses_a_folder_it_did_not_make(tmp_path):
    import pytest

    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(SystemExit, match="not a demo warehouse"):
        run_demo(str(tmp_path), rows=100)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_the_pipeline_runs_on_a_loopback_s3_server(spark, tmp_path, capsys):
    rows = 2000
    result = run_demo(str(tmp_path / "catalog"), rows=rows, spark=spark, s3="loopback")
    out = capsys.readouterr().out
    assert "started a loopback S3 server" in out
    assert "created db.events at s3://icelog-demo/warehouse/db/events" in out
    assert result["rows_after_ingest"] == rows and result["log_events"] == 11
    assert len(result["snapshot_rows"]) == 3
    assert (tmp_path / "catalog" / "catalog.db").is_file()
    assert not (tmp_path / "catalog" / "db").exists()  # the table lives on S3, not beside the log
