"""The read benchmark runs end to end on a small table: icelog, DuckDB and PyIceberg return the same rows for the
full scan and the selective filter, and the JSON carries every figure."""

from __future__ import annotations

from tools.bench_scan_read import run


def test_bench_scan_read_reports_the_same_rows_for_every_reader(tmp_path) -> None:
    result = run(str(tmp_path), rows=20_000, files=4, repeat=1)
    readers = [result[k] for k in ("icelog", "duckdb", "pyiceberg")]
    assert {r["full_rows"] for r in readers} == {19_800}                # 1% deleted
    assert len({r["selective_rows"] for r in readers}) == 1 and readers[0]["selective_rows"] > 0
    assert all(r["full_seconds"] > 0 and r["selective_seconds"] > 0 for r in readers)
    assert result["icelog"]["pool_peak_bytes"] >= result["icelog"]["result_bytes"] > 0
    assert set(result["ratios"]) == {"icelog_vs_duckdb_full", "icelog_vs_duckdb_selective", "icelog_peak_vs_result"}
