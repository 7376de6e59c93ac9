"""msprobe's compare table: its CSV headers, the columns by index and the words its cells hold. Shared by the rows,
the rules, the cells and the match (``stats_compare``)."""

BASIC = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
         "NPU Requires_grad", "Bench Requires_grad"]  # fmt: skip
STATS = ("max", "min", "mean", "l2norm")
DIFFS = ["Max diff", "Min diff", "Mean diff", "L2norm diff",
         "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]  # fmt: skip
EXTRA = ["Requires_grad Consistent", "Result", "Err_message"]
SUMMARY_HEADER = BASIC + DIFFS + [f"NPU {s}" for s in STATS] + [f"Bench {s}" for s in STATS] + EXTRA
MD5_HEADER = [*BASIC, "NPU MD5", "BENCH MD5", *EXTRA]
STACK = "NPU_Stack_Info"
N_A, NAN, INF, NEG_INF, DIFF = "N/A", "Nan", "inf", "-inf", "Diff"
# columns by index (BASIC, then the summary's diffs and statistics, or the md5s)
NPU_NAME, BENCH_NAME, NPU_DTYPE, BENCH_DTYPE, NPU_SHAPE, BENCH_SHAPE, NPU_REQ, BENCH_REQ = range(8)
NORM_REL, NPU_MAX, NPU_MIN, BENCH_MAX, BENCH_MIN = 15, 16, 17, 20, 21
NPU_MD5, BENCH_MD5 = 8, 9
