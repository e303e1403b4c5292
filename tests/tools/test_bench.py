"""The benchmark runs end to end on tiny sizes and prints the JSON the README and issues refer to."""

from __future__ import annotations

import json

from tools.bench import main


def test_bench_prints_json_with_every_figure(capsys):
    main(["--sizes", "10,120", "--samples", "3", "--history", "6", "--delete-rows", "4000", "--delete-files", "2",
          "--time-travel-events", "3000", "--scan-sizes", "1000", "--rest-clients", "2", "--rest-commits", "2",
          "--s3-history", "2,4", "--s3-samples", "2", "--commits", "5", "--writers", "1,2", "--writer-commits", "3",
          "--writer-rest-commits", "2"])
    result = json.loads(capsys.readouterr().out)
    side_by_side = result["commits_side_by_side"]
    for system in ("icelog", "ducklake", "pyiceberg"):
        assert side_by_side[system]["rows"] == 50 and side_by_side[system]["first_5"]["n"] == 5
        assert side_by_side[system]["cpu_ms_p50"]["last_5"] > 0 and side_by_side[system]["cpu_last_over_first_p50"]
    assert side_by_side["icelog_p50_over_ducklake_p50"]["last_5"] > 0
    throughput = result["commits_per_second_one_table"]
    for kind, commits in (("python_api", 3), ("python_api_threads_one_process", 3), ("rest_pyiceberg", 2),
                          ("rest_duckdb", 2)):
        for writers in (1, 2):
            figure = throughput[kind][str(writers)]
            assert figure["commits"] == figure["snapshots"] == writers * commits  # every append landed once
            assert figure["rows"] == 10 * writers * commits and figure["commits_per_second"] > 0
            if kind.startswith("rest"):
                assert figure["client_cpu_ms_per_commit"] > 0 and figure["server_cpu_ms_per_commit"] > 0
            elif kind == "python_api":
                assert figure["writer_cpu_ms_per_commit"] > 0
    assert throughput["python_api_threads_one_process"]["2"]["log_transactions"] <= 6  # shared when they wait
    for size in ("10", "120"):
        ours = result["icelog"]["append_1_file"][size]
        for key in ("log_commit_ms", "log_commit_synchronous_normal_ms", "commit_and_sync_projection_ms",
                    "append_files_end_to_end_ms"):
            assert ours[key]["n"] == 3 and 0 < ours[key]["p50"] <= ours[key]["p95"]
        assert result["pyiceberg"]["add_files_1_file"][size]["add_files_ms"]["p50"] > 0
    assert result["icelog"]["history"]["append_after_6_commits_ms"]["p50"] > 0
    assert result["pyiceberg"]["history"]["append_after_6_commits_ms"]["p50"] > 0
    assert set(result["speedup"]) >= {"log_commit_vs_pyiceberg_add_files_p50_at_10",
                                      "append_vs_pyiceberg_append_p50_after_6_commits"}
    deletes = result["row_delete_1_percent"]
    assert deletes["rows"] == 4000 and deletes["icelog_added_position_deletes"] > 0
    assert deletes["icelog_merge_on_read_seconds"] > 0 and deletes["pyiceberg_copy_on_write_seconds"] > 0
    compaction = result["compaction_100_files"]
    assert compaction["files_before"] == 100 and 0 < compaction["files_after"] < 100
    assert result["as_of_version"]["events"] >= 3000 and result["as_of_version"]["as_of_ms"]["p50"] > 0
    assert result["plan_files"]
    rest = result["rest_commits"]
    for shape in ("one_table_per_client", "one_shared_table"):
        assert rest[shape]["clients"] == 2 and rest[shape]["appends"] == 4
        assert 0 < rest[shape]["commit_request_ms"]["p50"] <= rest[shape]["commit_request_ms"]["p95"]
    assert rest["one_shared_table"]["snapshots_landed"] == 4
    s3 = result["s3_append_1_file"]
    for history in ("2", "4"):
        assert s3["icelog"][history]["append_ms"]["n"] == 2
        assert s3["icelog"][history]["requests_per_append"] == 6  # data, manifest, list, metadata, hint + a HEAD
        assert s3["pyiceberg"][history]["requests_per_append"] > 6
        assert s3["speedup_p50"][history] > 0
