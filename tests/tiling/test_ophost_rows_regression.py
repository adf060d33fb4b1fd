"""Regression: rows on which the mirror disagreed with the real op_host (the oracle of
``test_ophost_oracle.py``), pinned to what op_host answered, so that they hold without the oracle.

* The legacy IFA route stages its matmul results in GM in every perf mode but all-vector (mode 1):
  the mirror left the staging areas out (``rand_arch22_0_01200``: 16,777,216 bytes against 16,930,816).
* ``inner_precise`` 2 with paged int8 KV and query lengths takes IFA's ATB kernel: mode 3 in the key, every
  AIV:AIC group launched, its own workspace (``rand_arch22_0_01878``; the mirror said mode 1, 8 blocks).
* op_host reads "value" as the flattened input 2 (``GetInputDesc(VALUE_INDEX)``), the second key tensor of a
  tensor list, so a value list of another dtype is accepted (``rand_arch22_0_01002``: a bool value list).
* The legacy PFA route's workspace, like its key, is not modelled outside its TND branch: said so, not
  compared (``rand_arch22_1_07100``, BNSD). The TND branch's key and workspace are modelled
  (``pfa_tnd``): ``rand_arch22_0_01813`` (NTD_TND, a paged BBH cache and a mask: 4000000000010200002,
  18,579,456 bytes).
* Seed 1's rows: the PFA route refuses a TND mask with sparse_mode 0 (``rand_arch22_1_02287``), an
  actual_shared_prefix_len beyond S of the shared prefix (``rand_arch22_1_06086``) and a 4-D paged cache
  with a BSND query (``rand_arch22_1_01829``); the mirror accepted all three.
* Seed 1's NZ antiquant rows: the legacy IFA route refuses key and value scales of different shapes
  (``rand_arch22_1_03954``: (2, 128) and (2, 256), ``CheckKeyAndValueAntiquantOffset``) and per-channel
  scales of an NZ cache that are not the layout's shape (``rand_arch22_1_04011``, ``rand_arch22_1_06329``:
  (2, 128) with BNSD, which wants (N2, 1, D), ``CheckGqaAntiQuantPerChannel``). The oracle's logged reason
  was a DT_UNDEFINED size query: these UT-format rows give the scales no format, and op_host failed the
  format check first; with ND formats it names the two rules above.
* Seed 2's rows: a per-channel key scale of 5 dims (``rand_arch22_2_00001``: ``CheckKVAntiQuantParaShapeLegal``
  takes 1-4) and a paged TND call on the PFA route whose value D (64, read from a (blocks, block size, H)
  cache as H / num_key_value_heads) does not pair with the query's and key's 128 (``rand_arch22_2_05206``).
* Seed 2's NTD_TND rows on the legacy PFA route take op_host's TND branch (``pfa_tnd``): 512-row S1 blocks
  over the per-batch query lengths (``rand_arch22_2_07021``: 399 and 1720 rows, 5 blocks, launch 5; the
  sOuter planner said 9) and, with every query length 1 and G <= 16, the whole group as one unit
  (``rand_arch22_2_07141``: G 16, one unit, launch 1; the planner said 16). Their keys and workspaces, and
  those of seed 2's TND rows (``rand_arch22_2_04406``, ``rand_arch22_2_07567``) and seed 3's NTD_TND rows,
  were not modelled: ``4 * 10^18`` + template (3, 2 with a mask) + layout digit (NTD_TND 2 at 10^5), and
  16 MiB + AIC * (3 score tiles of a whole S2 step + 4 output tiles) in fp32 (``rand_arch22_2_07021``:
  100,663,296 bytes for 512-row S1 blocks and a 512-position S2 step).
* Seed 3's rows: the PFA route checks the token windows against each batch's actual lengths (sparse 0 with
  a mask: |pre_tokens| below the batch's KV length, ``rand_arch22_3_01402``: pre_tokens -1 with KV lengths
  0); and the legacy IFA route sizes its staging areas with G even when the key and value are empty (the
  mirror's G was 0 there: ``rand_arch22_3_06156``, 16,818,176 bytes against 17,145,856).
* Seed 4's rows: the PFA route's TND check refuses any mask tensor with sparse_mode 0, an empty one too
  (``rand_arch22_4_03347``: a (2048, 0) mask), and a paged TND call whose KV lengths are all 0 has no valid
  block (``rand_arch22_4_02222``: ``CheckPAWhenBaseApi`` fails without a log).
* An empty TND call with num_key_value_heads -1 (found by the simulated fuzz tier, checked against the oracle):
  the split-fuse route takes it, and its key keeps the TND digit.
* MLA with a paged NZ cache on the legacy IFA route (written here: the generator made none until it got its
  own MLA-NZ rows): IFATiling sets its GQA KV-NZ flag only without rope, so MLA FA quant is perf mode 5, not
  6 (``mla_nz_*``): flash decode (SplitBNS, sInner halved for parts of 256-512 positions), the balanced split
  (TND, per-batch KV lengths that differ, IsFdBalanceCase's shapes; the key's balance digit), S1 row blocks of
  ``128 // G`` positions, the key's origin digit the output's dtype, no AMLA, the even split's lowered
  ``coreNum_``. Without rope an NZ cache with query length 1 is not GQA MTP and takes FD
  (``int8_nz_bnsd_fd``); the paged callback area counts the cores split over, not the used ones
  (``int8_paged_b1``). Seed 1's MLA-NZ rows from the generator: TND kv lengths are held to the block table
  too (``rand_arch22_1_07093``: 3436 > 14 blocks of 128), and the key's paged digit follows the table's width
  when every kv length is 0 (``rand_arch22_1_09471``).
"""

from __future__ import annotations

import csv

import pytest

from cvtile.tiling.fia import tile_fia
from cvtile.tiling.oracle import cvtile_record
from cvtile.tiling.params import FiaParams
from cvtile.tiling.platform import ut_platform
from cvtile.tiling.random_calls import random_rows


_SEED_ROWS: dict = {}


def _rows(corpus_file, seed: int) -> dict:
    """The generator's 10,000 arch22 rows of ``seed`` (mutating the UT corpus), by case name (made once)."""
    if seed not in _SEED_ROWS:
        with open(corpus_file("ut_tiling/fia_arch22.csv"), newline="") as fh:
            corpus = list(csv.DictReader(fh))
        _SEED_ROWS[seed] = {r["case_name"]: r for r in random_rows("arch22", 10000, seed=seed, corpus_rows=corpus)}
    return _SEED_ROWS[seed]


@pytest.fixture(scope="module")
def row_of(corpus_file):
    """A case's row, by its name ``rand_arch22_<seed>_<n>``."""
    return lambda case: _rows(corpus_file, int(case.split("_")[2]))[case]


@pytest.fixture(scope="module")
def rows_seed0(corpus_file):
    return _rows(corpus_file, 0)


#: op_host's answers (tiling key, block dim, workspace bytes) for the rows, from the oracle; the keys of
#: 4 * 10^18 and up are the legacy PFA route's TND branch
OP_HOST = {"rand_arch22_0_01200": (10000000000022220, 20, 16930816),
           "rand_arch22_0_03626": (10000000000022221, 20, 17145856),
           "rand_arch22_0_04278": (10000000000122220, 20, 17143296),
           "rand_arch22_0_01878": (30000000000200302, 20, 79691776),
           "rand_arch22_0_01002": (104000000010022221, 2, 16854016),
           "rand_arch22_0_02889": (104000000010022221, 2, 16854016),
           "rand_arch22_0_01813": (4000000000010200002, 20, 18579456),
           "rand_arch22_2_04406": (4000000000000000003, 8, 20361216),
           "rand_arch22_2_07021": (4000000000000200003, 5, 100663296),
           "rand_arch22_2_07141": (4000000000000200002, 1, 18415616),
           "rand_arch22_2_07567": (4000000000000000003, 16, 19070976),
           "rand_arch22_3_02536": (4000000000000200003, 20, 27262976),
           "rand_arch22_3_04118": (4000000000000200003, 20, 22839296),
           "rand_arch22_3_06557": (4000000000000200003, 4, 19398656),
           "rand_arch22_3_08226": (4000000000000200003, 8, 18579456),
           "rand_arch22_3_09861": (4000000000000200003, 16, 39059456),
           "rand_arch22_1_09471": (15000000020222331, 1, 17238144)}
PFA_TND_CASES = sorted(c for c, (key, _, _) in OP_HOST.items() if key // 10 ** 18 == 4)


@pytest.mark.parametrize("case", sorted(OP_HOST))
def test_the_mirror_gives_op_hosts_answer(row_of, case):
    rec = cvtile_record(row_of(case), "arch22")
    assert rec["got"] == "SUCCESS", rec
    assert rec["key_mirrored"] and rec["workspace_mirrored"]
    assert (rec["tiling_key"], rec["block_dim"], rec["workspace"]) == OP_HOST[case]


@pytest.mark.parametrize("case", PFA_TND_CASES)
def test_pfa_tnd_rows_take_the_legacy_pfa_route(row_of, case):
    rec = cvtile_record(row_of(case), "arch22")
    assert rec["route"].startswith("pfa/"), rec


def test_ifa_staging_areas_are_in_the_workspace_layout(rows_seed0):
    t = tile_fia(FiaParams.from_csv_row(rows_seed0["rand_arch22_0_01200"]), ut_platform("arch22"))
    assert {"ifa_mm1_scores", "ifa_vec1_probs", "ifa_mm2_out", "ifa_vec2_out"} <= set(t.workspace_layout)


def test_the_atb_route_is_named_and_its_tasks_are_said_to_be_unmodelled(rows_seed0):
    t = tile_fia(FiaParams.from_csv_row(rows_seed0["rand_arch22_0_01878"]), ut_platform("arch22"))
    assert t.decision("route_variant").value == "atb"
    assert "RowTasks" in t.extras["row_tasks"]


def test_a_tensor_list_value_is_read_as_the_second_key_tensor(rows_seed0):
    p = FiaParams.from_csv_row(rows_seed0["rand_arch22_0_01002"])
    assert p.is_tensor_list and p.value.dtype == "bool"
    assert p.value_as_read is p.key_list[1] and p.value_as_read.dtype == "bfloat16"


#: rows op_host refuses that the mirror accepted, with the parameter the mirror's refusal must name
REFUSED = {"rand_arch22_1_02287": "atten_mask", "rand_arch22_1_06086": "actual_shared_prefix_len",
           "rand_arch22_1_01829": "key",
           "rand_arch22_1_03954": "value_antiquant_scale", "rand_arch22_1_04011": "key_antiquant_scale",
           "rand_arch22_1_06329": "key_antiquant_scale",
           "rand_arch22_2_00001": "key_antiquant_scale", "rand_arch22_2_05206": "query",
           "rand_arch22_4_03347": "atten_mask", "rand_arch22_4_02222": "actual_seq_lengths_kv",
           "rand_arch22_1_07093": "actual_seq_lengths_kv"}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_mirror_refuses_what_op_host_refuses(row_of, case):
    rec = cvtile_record(row_of(case), "arch22")
    assert rec["got"] == "FAILED" and REFUSED[case] in rec["error"], rec


@pytest.fixture(scope="module")
def rows_seed1(corpus_file):
    return _rows(corpus_file, 1)


def test_legacy_pfa_workspace_outside_the_tnd_branch_is_marked_unmodelled(rows_seed1):
    rec = cvtile_record(rows_seed1["rand_arch22_1_07100"], "arch22")
    assert rec["got"] == "SUCCESS" and rec["route"].startswith("pfa/")
    assert rec["workspace_mirrored"] is False and rec["key_mirrored"] is False


@pytest.fixture(scope="module")
def rows_seed2(corpus_file):
    return _rows(corpus_file, 2)


def test_pfa_tnd_branch_folds_the_group_only_for_one_token_queries(rows_seed2):
    folded = tile_fia(FiaParams.from_csv_row(rows_seed2["rand_arch22_2_07141"]), ut_platform("arch22"))
    assert folded.decision("g_fold").value == 16 and folded.decision("s1_block").value == 16
    assert [len(c.tasks) for c in folded.cores] == [1] and folded.cores[0].tasks[0].m_rows == 16
    rows = tile_fia(FiaParams.from_csv_row(rows_seed2["rand_arch22_2_07021"]), ut_platform("arch22"))
    assert rows.decision("g_fold").value == 1 and rows.decision("s1_block").value == 512
    assert sorted(t.m_rows for c in rows.cores for t in c.tasks) == [184, 399, 512, 512, 512]


@pytest.fixture(scope="module")
def rows_seed3(corpus_file):
    return _rows(corpus_file, 3)


def test_pfa_token_window_against_the_batch_kv_length(rows_seed3):
    rec = cvtile_record(rows_seed3["rand_arch22_3_01402"], "arch22")
    assert rec["got"] == "FAILED" and "pre_tokens" in rec["error"] and "batch 0 (0)" in rec["error"], rec


def test_ifa_with_empty_kv_sizes_its_staging_with_g(rows_seed3):
    rec = cvtile_record(rows_seed3["rand_arch22_3_06156"], "arch22")
    assert rec["got"] == "SUCCESS" and rec["route"].startswith("ifa/"), rec
    assert (rec["tiling_key"], rec["block_dim"], rec["workspace"]) == (10000000000022220, 20, 17145856)


def _empty_tnd_row(num_key_value_heads: str) -> dict:
    from cvtile.tiling.random_calls import header

    row = dict.fromkeys(header("arch22"), "")
    for name in ("query", "key", "value", "attention_out"):
        row.update({f"{name}_shape": "0 1 16", f"{name}_dtype": "FLOAT16", f"{name}_format": "ND"})
    for name in ("actual_seq_lengths", "actual_seq_lengths_kv"):
        row.update({f"{name}_shape": "1", f"{name}_dtype": "INT64", f"{name}_format": "ND", f"{name}_data": "0"})
    row.update(case_name=f"empty_tnd_nkv{num_key_value_heads}", num_heads="1", scale="1.0",
               pre_tokens="2147483647", next_tokens="2147483647", input_layout="TND",
               num_key_value_heads=num_key_value_heads, sparse_mode="0", inner_precise="0", block_size="0",
               antiquant_mode="0", softmax_lse_flag="0", key_antiquant_mode="0", value_antiquant_mode="0",
               query_quant_mode="0", pse_type="0", out_dtype="0")
    return row


def test_regression_a_negative_kv_head_count_on_the_split_fuse_route_keeps_its_layout_in_the_key():
    """The split-fuse route takes an empty TND call with num_key_value_heads -1 (op_host: SUCCESS, key
    5000000000000200100, 20 blocks, 79,691,776 bytes). The FIA parser rejects the count, and the legacy driver
    then planned from a blank info: layout BSH, the TND digit (2 x 10^5) missing from the key. It now plans
    from the parser's info as far as it got (``parse_info_partial``). (The API refuses the count itself:
    tests/kernels/test_bad_input.py.)"""
    t = tile_fia(FiaParams.from_csv_row(_empty_tnd_row("-1")), ut_platform("arch22"))
    assert (t.tiling_key, t.block_dim, t.workspace_bytes) == (5000000000000200100, 20, 79691776)
    same = tile_fia(FiaParams.from_csv_row(_empty_tnd_row("1")), ut_platform("arch22"))
    assert same.tiling_key == t.tiling_key


def _int8_cache_row(name: str, *, b=1, s1=1, n=8, lens=(300,), layout="BSND", bs=128, sparse=0, qlens=None,
                    query="INT8", nz=True, rope=True) -> dict:
    """A paged decode on an int8 cache (one KV head): MLA FA quant (int8 query, bf16 ropes, D 512) by default;
    ``rope=False``: a bf16 query with D 128 on an antiquant cache."""
    from cvtile.tiling.random_calls import header

    d = 512 if rope else 128
    per = max(-(-max(lens) // bs), 1)
    row = dict.fromkeys(header("arch22"), "")

    def t(tensor, shape, dtype, data=None):
        row.update({f"{tensor}_shape": " ".join(map(str, shape)), f"{tensor}_dtype": dtype,
                    f"{tensor}_format": "ND"})
        if data is not None:
            row[f"{tensor}_data"] = " ".join(map(str, data))

    if layout == "TND":
        qs, ds = (qlens[-1], n, d), (qlens[-1], n)
        t("actual_seq_lengths", (b,), "INT64", qlens)
    elif layout == "BSH":
        qs, ds = (b, s1, n * d), (b, s1, n)
    elif layout == "BNSD":
        qs, ds = (b, n, s1, d), (b, n, s1)
    else:
        qs, ds = (b, s1, n, d), (b, s1, n)
    t("query", qs, query)
    t("attention_out", qs, "BF16")
    cache = (b * per, 1, d // 32, bs, 32) if nz else ((b * per, 1, bs, d) if layout == "BNSD" else (b * per, bs, d))
    t("key", cache, "INT8")
    t("value", cache, "INT8")
    t("block_table", (b, per), "INT32")
    t("actual_seq_lengths_kv", (len(lens),), "INT64", lens)
    if rope:
        t("query_rope", qs[:-1] + (qs[-1] // d * 64,), "BF16")
        t("key_rope", (b * per, 1, 4, bs, 16), "BF16")
        t("dequant_scale_query", ds, "FLOAT")
        t("key_antiquant_scale", (1,), "FLOAT")
        t("value_antiquant_scale", (1,), "FLOAT")
    elif nz:
        t("key_antiquant_scale", (1, 1, d), "BF16")
        t("value_antiquant_scale", (1, 1, d), "BF16")
    else:
        t("antiquant_scale", (2, d), "BF16")
    if sparse:
        t("atten_mask", (2048, 2048), "INT8")
    row.update(case_name=name, num_heads=n, scale="0.04", pre_tokens=2147483647,
               next_tokens=0 if sparse else 2147483647, input_layout=layout, num_key_value_heads=1,
               sparse_mode=sparse, inner_precise=0 if rope else 1, block_size=bs, antiquant_mode=0,
               softmax_lse_flag=0, key_antiquant_mode=0, value_antiquant_mode=0,
               query_quant_mode=3 if rope else 0, pse_type=0, out_dtype=0)
    return {k: str(v) for k, v in row.items()}     # as the CSV loader reads them


#: the rows (``_int8_cache_row`` keywords) and op_host's (key, block dim, workspace) for them, from the oracle
INT8_CACHE_ROWS = {
    "mla_nz_no_fd": (dict(), (15000000020222331, 1, 16881792)),
    "mla_nz_fd": (dict(lens=(8192,)), (15000000020322331, 16, 18893312)),
    "mla_nz_fd_b4_g32": (dict(b=4, n=32, lens=(4096,) * 4), (15000000020322331, 20, 27347456)),
    "mla_nz_balanced_bsh": (dict(b=3, n=16, lens=(300, 1000, 129), layout="BSH"), (15000001020322331, 4, 32221696)),
    "mla_nz_equal_bsh": (dict(b=3, n=16, lens=(1000,) * 3, layout="BSH"), (15000000020222331, 3, 17471872)),
    "mla_nz_balanced_tnd": (dict(b=2, lens=(300, 500), layout="TND", qlens=(2, 4), sparse=3),
                            (15000001020222332, 2, 21408256)),
    "mla_nz_balanced_tnd_fd": (dict(b=6, lens=(4000, 100, 0, 7000, 3000, 9000), layout="TND",
                                    qlens=(1, 2, 3, 4, 5, 6)), (15000001020322332, 16, 29927936)),
    "mla_nz_fd_balance_case": (dict(b=4, s1=3, n=64, lens=(4096, 4500, 5000, 5120), sparse=3),
                               (15000001020322331, 19, 64334336)),
    "mla_nz_s1_blocks": (dict(b=3, s1=8, n=32, lens=(201,) * 3, layout="BSH", sparse=3),
                         (15000000020222331, 6, 25441024)),
    "int8_nz_bnsd_fd": (dict(lens=(8192,), layout="BNSD", query="BF16", rope=False),
                        (16000000020322320, 20, 24103424)),
    "int8_paged_b1": (dict(layout="BSH", query="BF16", nz=False, rope=False), (12000000000222321, 1, 18789376)),
}


@pytest.mark.parametrize("case", sorted(INT8_CACHE_ROWS))
def test_int8_cache_rows_give_op_hosts_answer(case):
    kw, want = INT8_CACHE_ROWS[case]
    rec = cvtile_record(_int8_cache_row(case, **kw), "arch22")
    assert rec["got"] == "SUCCESS" and rec["route"] == "ifa/IFATiling", rec
    assert (rec["tiling_key"], rec["block_dim"], rec["workspace"]) == want


def test_mla_with_an_nz_cache_is_the_mla_perf_mode_with_its_flash_decode():
    """The perf digit (10^15) is 5 (MLA), not 6 (GQA MTP / DD, which refuses FD); FD splits the KV 8192 of the
    one (b, n2) over 16 cube cores in parts of 512 positions, each walked in two 256-position blocks."""
    t = tile_fia(FiaParams.from_csv_row(_int8_cache_row("fd", lens=(8192,))), ut_platform("arch22"))
    assert t.key_fields["perf"] == 5 and t.decision("flash_decode").value is True
    assert t.decision("kv_splits").value == 16 and t.s2_base == 256


def test_the_balanced_split_gives_each_tnd_batch_its_own_rows():
    t = tile_fia(FiaParams.from_csv_row(_int8_cache_row("tnd", b=2, lens=(300, 500), layout="TND", qlens=(2, 4),
                                                        sparse=3)), ut_platform("arch22"))
    assert t.decision("balance_mode").value is True and tuple(t.q_seqlens) == (2, 2)
    assert sorted((task.b, task.m_rows) for c in t.cores for task in c.tasks) == [(0, 16), (1, 16)]


#: MLA rows op_host refuses (ProcessMlaRope), with the parameter the mirror's refusal must name
MLA_REFUSED = {"block_size": dict(bs=64), "input_layout": dict(layout="BNSD")}


@pytest.mark.parametrize("param", sorted(MLA_REFUSED))
def test_the_mla_checks_refuse_what_op_host_refuses(param):
    rec = cvtile_record(_int8_cache_row(f"refused_{param}", **MLA_REFUSED[param]), "arch22")
    assert rec["got"] == "FAILED" and param in rec["error"], rec
