"""arch22 legacy route "IFA" (incremental flash attention tiling): the checks that can reject a call.

Model
-----
The legacy IFA tiling walks the call in this order; the first broken rule rejects it (status 561002):

1. *ATB decode*: ``inner_precise`` 2 with a paged int8 cache and a query length list with values goes to a
   separate small tiling that only needs a non-empty query and a BSH/BSND/BNSD/TND layout.
2. *Platform*: AIV/AIC ratio 1 or 2.
3. *Base inputs*: a non-empty query; key and value of one dtype; ``num_heads`` > 0, kv heads (0 means
   ``num_heads``) <= and dividing it; layouts BSH/BSND/BNSD/TND (+ the ``_NBSD`` / ``_NTD`` outputs); BSH:
   H divisible by ``num_heads``; heads read from query equal ``num_heads`` (unless a shared prefix); int4
   caches need D % 64 == 0; ``query_rope`` and ``key_rope`` come together; S of query is 1, 2..16 (GQA
   "MTP") or <= 32 with rope (TND: per-batch lengths from the cumulative list, each <= 32, T == last value,
   T <= 1 Mi / dtype size); TND D 512 needs rope; ``inner_precise`` 0/1; paged: int4 needs BSH/BSND, a
   non-empty block table, TND: block-table rows == query list length; paged BNBD (4-D) caches need a
   BNSD/TND query layout; contiguous caches: key == value shape per batch, a tensor list has 1-batch
   tensors of the right rank and heads; rank/D agreement of query, key and attention_out; formats ND-like;
   G <= 64 and no int8/int8 without rope; fp16 query takes fp16/int8/int4 caches, bf16 takes
   bf16/int8/int4; paged block size aligned (16 fp16/bf16, 32 int8); B <= 65536; without rope D <= 512 and
   kv heads <= 256; the cache dtype has a known size; an int8 query needs an NZ paged cache; the
   (query, attention_out) dtype pair is one the kernels have.
4. *Roll-back*: a non-empty, non-paged call with D >= 1024 or an fp32/fp32 or int8/int8 in/out pair has no
   IFA kernel (reject).
5. *Optional inputs*: kv length list (paged calls need it; length 1 or >= B; values >= 0 and <= the cache
   S), ``pse_shift`` (fp16/bf16 = query dtype, [B|1, N, 1, S >= S max], not with an NZ cache), per-layer
   quant inputs only with an int8 query, post-quant scale/offset dtypes and shapes, the int8-query (MLA
   full quant) inputs (the query scale the query's shape without D, (B, S, num_heads) for BSH; the key and
   value scales (1,)), the attention mask (TND: sparse 0 no mask / 3 a 2048x2048 mask; MLA sparse rules;
   bool/int8/uint8; 2048x2048 for band/right-down/MTP; else batch == B and last axis >= S), the paged
   block rules (N2*D <= 65535 for BSH, 0 < block_size <= 512, alignment, lengths fit the table), kv
   padding (not int4, not MLA), shared prefix (same kv dtype, no paged cache / kv padding, shapes, length).

6. *Antiquant*: KV antiquant needs a scale (``antiquant_scale`` or ``key_antiquant_scale``); the key's and
   the value's own scales (and offsets) share a shape (and dtype) unless the modes are 0/1; an NZ cache's
   per-channel parameters of 1-3 dims have the layout's shape (BNSD (N2, 1, D), BSND/TND (N2, D), BSH (N2*D)).

7. *MLA* (``ProcessMlaRope``): query_rope in the query's dtype (bf16 with an int8 query) and shape but D, key_rope
   in the key's dtype (query_rope's with an int8 query) and the cache's shape with rope dim 64 (3-D, 4-D or NZ
   with the dtype's 32-byte fraction), one KV head, G a power of 2 up to 128, D 512, rope dim 64, an NZ cache
   only with BSH/BSND/TND, a paged cache, no antiquant, pse, shared prefix or int8 output, block size 16 or 128
   (128 with an NZ cache).

The GQA route with an NZ (5-D) paged cache takes only its template's calls (``_gqa_nz``: ``ProcessGqaKvNz``).

Not mirrored (documented gap): the other per-mode antiquant parameter shape and dtype rules; calls reaching them
are accepted here.
"""

from __future__ import annotations

from ..errors import AclnnStatus, ParamError
from ..info import present
from ..layouts import dim, numel
from .legacy import legacy_value

CHECKER = "legacy_ifa"

_FORMATS = ("ND", "NCHW", "NHWC", "NCDHW")
#: dtypes whose size the IFA tiling knows (anything else is "not supported")
_SIZED = {"float32": 4, "float16": 2, "bfloat16": 2, "bool": 1, "int8": 1, "uint8": 1, "int4": 1}
#: (query dtype, attention_out dtype) pairs with an IFA kernel; the second set has a non-rolled-back kernel
_IN_OUT = {("int8", "int8"), ("int8", "float16"), ("float16", "int8"), ("float16", "float16"),
           ("bfloat16", "bfloat16"), ("bfloat16", "int8"), ("float32", "float32"), ("int8", "bfloat16")}
_IN_OUT_NEW = _IN_OUT - {("int8", "int8"), ("float32", "float32")}
_BLOCK_SIZE_MAX = 512
_ND2NZ_STRIDE_MAX = 65535


def _fail(param, value, rule):
    raise ParamError(param, value, rule, status=AclnnStatus.INNER_TILING_ERROR, checker=CHECKER)


def _u32(x: int) -> int:
    return x & 0xFFFFFFFF


def _data(t):
    return t.data if present(t) else None


def check(p, plat, dims) -> None:
    """Run the legacy IFA checks on ``p`` (``dims``: the legacy entry's axes, unused here)."""
    _IfaCall(p, plat).run()


class _IfaCall:
    """The state the IFA checks build up while they walk one call."""

    def __init__(self, p, plat):
        self.p, self.plat = p, plat
        self.paged = present(p.block_table)
        self.q = p.query
        self.k = p.key
        self.v = legacy_value(p)
        self.out = p.attention_out
        self.q_dtype, self.kv_dtype, self.out_dtype = p.query.dtype, p.key.dtype, p.attention_out.dtype
        self.layout = p.input_layout
        # tiling sink: a length list given without values (the max-workspace pass)
        self.sink = ((present(p.actual_seq_lengths_kv) and p.actual_seq_lengths_kv.data is None)
                     or (present(p.actual_seq_lengths) and p.actual_seq_lengths.data is None))
        self.prefix = present(p.key_shared_prefix) or present(p.value_shared_prefix)
        self.rope = False
        self.mtp = False
        self.kv_nz = False
        self.quant = False
        self.s_max = 0
        self.max_actual = 0
        self.kv_seq_lens: list[int] = []

    # ------------------------------------------------------------------------------------------ driver
    def run(self) -> None:
        if self._atb():
            return
        cv = self.plat.aiv // self.plat.aic if self.plat.aic else 0
        if cv not in (1, 2):
            _fail("platform", (self.plat.aic, self.plat.aiv), "the IFA tiling needs an AIV:AIC ratio of 1 or 2")
        self.cv_ratio = cv
        self._base_inputs()
        self._roll_back()
        self._optional_inputs()

    # -------------------------------------------------------------------------------------- ATB decode
    def _atb(self) -> bool:
        p = self.p
        aq = p.actual_seq_lengths
        if (p.inner_precise != 2 or not self.paged or not present(aq) or aq.data is None or numel(aq.shape) <= 0
                or self.kv_dtype != "int8"):
            return False
        if numel(self.q.shape) == 0:
            _fail("query", self.q.shape, "query must not be empty")
        if self.layout not in ("BSH", "BSND", "BNSD", "TND"):
            _fail("input_layout", self.layout, "the ATB decode path takes BSH, BSND, BNSD or TND only")
        return True

    # ------------------------------------------------------------------------------------- base inputs
    def _base_inputs(self) -> None:
        if numel(self.q.shape) == 0:
            _fail("query", self.q.shape, "query must not be empty on the IFA route")
        self._qkv()
        self._attrs()
        self._kv_shapes()
        self._qk_out_shapes()
        self._formats_and_limits()
        if self.kv_dtype not in _SIZED:
            _fail("key", self.kv_dtype, "the key/value dtype is not supported by the IFA tiling")
        if self.q_dtype == "int8" and not (self.paged and self.kv_layout == "NZ"):
            _fail("block_table", None, "an int8 query needs a paged cache in NZ layout")
        if (self.q_dtype, self.out_dtype) not in _IN_OUT:
            _fail("attention_out", self.out_dtype,
                  f"query dtype {self.q_dtype} with attention_out dtype {self.out_dtype} is not supported")
        self.anti_quant = self.q_dtype != self.kv_dtype and self.kv_dtype in ("int8", "int4")

    def _qkv(self) -> None:
        p, q = self.p, self.q.shape
        if self.kv_dtype != self.v.dtype:
            _fail("value", self.v.dtype, f"key and value must have one dtype (key {self.kv_dtype})")
        self.b = dim(q, 0)
        n = _u32(p.num_heads)
        if n == 0:
            _fail("num_heads", p.num_heads, "num_heads must not be 0")
        n2 = _u32(p.num_key_value_heads) or n
        if n2 > n or n % n2 != 0:
            _fail("num_key_value_heads", p.num_key_value_heads,
                  f"num_key_value_heads must be <= num_heads ({n}) and divide it")
        self.n, self.n2, self.g = n, n2, n // n2
        layout = self.layout
        k_rank = len(self.k.shape)
        self.sliding = False
        if layout in ("BSH", "BSH_NBSD"):
            self.in_layout = "BSH_BSND"
            if dim(q, 2) % n != 0:
                _fail("query", q, f"H of query must be a multiple of num_heads ({n})")
            s, d = dim(q, 1), dim(q, 2) // n
            window = p.pre_tokens if -(1 << 31) <= p.pre_tokens < (1 << 31) else -1
            self.sliding = (layout == "BSH" and s == 1 and window > 0 and self.paged and not self.prefix
                            and len(self.v.shape) == 3 and not present(p.query_rope)
                            and self.q_dtype == self.kv_dtype and self.q_dtype in ("float16", "bfloat16"))
            if self.sliding:
                self.dv = dim(self.v.shape, 2) // n2
            heads = n
            if _u32(p.num_key_value_heads) != 0 and k_rank == 3 and dim(self.k.shape, 2) != 0:
                heads = d * n * n2 // dim(self.k.shape, 2)
        elif layout in ("BSND", "BSND_NBSD"):
            self.in_layout = "BSH_BSND"
            s, d, heads = dim(q, 1), dim(q, 3), dim(q, 2)
        elif layout in ("BNSD", "BNSD_NBSD"):
            self.in_layout = "BNSD"
            s, d, heads = dim(q, 2), dim(q, 3), dim(q, 1)
        elif layout in ("TND", "TND_NTD"):
            self.in_layout = "TND"
            s, d, heads = dim(q, 0), dim(q, 2), dim(q, 1)
        else:
            _fail("input_layout", layout, "the IFA route takes BSH, BSND, BNSD or TND (optionally with an "
                                          "NBSD/NTD output)")
        self.d = d
        self.q_s = s
        self.q_sq_sum = 0
        if self.in_layout == "TND":
            self._tnd()
            s = self.q_s
            bt = p.block_table
            if self.sink and self.paged and dim(bt.shape, 0) != 0:
                s = (self.t + dim(bt.shape, 0) - 1) // dim(bt.shape, 0)
        if heads != n and not self.prefix:
            _fail("num_heads", n, f"num_heads must match the heads of query ({heads})")
        if self.kv_dtype == "int4" and d % 64 != 0:
            _fail("query", q, f"with int4 key/value the head dim ({d}) must be a multiple of 64")
        if not self.sliding:
            self.dv = d
        qr, kr = present(p.query_rope), present(p.key_rope)
        if qr != kr:
            _fail("key_rope" if qr else "query_rope", None, "query_rope and key_rope come together")
        self.rope = qr and kr
        self.mtp = 1 < s <= 16 and not self.rope
        self.kv_nz = k_rank == 5 and not self.rope
        if not self.rope and not self.mtp:
            if s != 1:
                _fail("query", q, f"without rope the query length ({s}) must be 1..16")
        elif layout not in ("TND", "TND_NTD") and s > 32:
            _fail("query", q, f"with rope the query length ({s}) must be <= 32")
        if layout == "TND" and d == 512 and not self.rope:
            _fail("query_rope", None, "TND with D 512 needs query_rope and key_rope")

    def _tnd(self) -> None:
        p = self.p
        size = _SIZED.get(self.q_dtype)
        if size is None:
            _fail("query", self.q_dtype, "the query dtype is not supported by the IFA tiling")
        self.t = dim(self.q.shape, 0)
        self.len_q_dims = 0
        if self.sink:
            if self.t > (1 << 20) // size:
                _fail("query", self.q.shape, "T of a TND query must be <= 1 Mi / dtype size")
            return
        aq, akv = _data(p.actual_seq_lengths), _data(p.actual_seq_lengths_kv)
        if aq is None:
            _fail("actual_seq_lengths", None, "a TND call needs actual_seq_lengths with values")
        if akv is None:
            _fail("actual_seq_lengths_kv", None, "a TND call needs actual_seq_lengths_kv with values")
        nq, nkv = numel(p.actual_seq_lengths.shape), numel(p.actual_seq_lengths_kv.shape)
        if nq <= 0:
            _fail("actual_seq_lengths", nq, "a TND call needs a non-empty actual_seq_lengths")
        if nq != nkv:
            _fail("actual_seq_lengths_kv", nkv, f"must have as many entries as actual_seq_lengths ({nq})")
        self.b = nq
        self.len_q_dims = nq
        if self.t > (1 << 20) // size:
            _fail("query", self.q.shape, "T of a TND query must be <= 1 Mi / dtype size")
        longest = 0
        for i in range(nq):
            cur = aq[i] if i < len(aq) else 0
            prev = aq[i - 1] if 0 < i <= len(aq) else 0
            s = cur if i == 0 else cur - prev
            if s < 0 or s > 32:
                _fail("actual_seq_lengths", tuple(aq), f"the query length of batch {i} ({s}) must be in [0, 32]")
            longest = max(longest, s)
            self.q_sq_sum += s * s
        last_q = aq[nq - 1] if nq - 1 < len(aq) else 0
        if self.t != last_q:
            _fail("actual_seq_lengths", tuple(aq), f"T of query ({self.t}) must equal the last entry")
        if not self.paged:
            last_kv = akv[nkv - 1] if nkv - 1 < len(akv) else 0
            if dim(self.k.shape, 0) != last_kv:
                _fail("actual_seq_lengths_kv", tuple(akv), f"T of key ({dim(self.k.shape, 0)}) must equal the "
                                                           "last entry")
        self.q_s = longest

    def _attrs(self) -> None:
        p = self.p
        if p.inner_precise not in (0, 1):
            _fail("inner_precise", p.inner_precise, "the IFA route takes inner_precise 0 or 1")
        if self.paged:
            bt = p.block_table.shape
            if self.kv_dtype == "int4" and self.in_layout != "BSH_BSND":
                _fail("input_layout", self.layout, "a paged int4 cache needs a BSH/BSND layout")
            if numel(bt) == 0:
                _fail("block_table", bt, "block_table must not be empty")
            if self.in_layout == "TND" and not self.sink and dim(bt, 0) != self.len_q_dims:
                _fail("block_table", bt, f"rows of block_table must equal the length of actual_seq_lengths "
                                         f"({self.len_q_dims})")
        else:
            self.batch_contiguous = self.b == dim(self.k.shape, 0)

    def _kv_shapes(self) -> None:
        p = self.p
        k_rank = len(self.k.shape)
        if self.paged:
            self.max_blocks = dim(p.block_table.shape, 1)
            self.s_max = self.max_blocks * _u32(p.block_size)
            self.kv_layout = {3: "BSH_BSND", 4: "BNSD", 5: "NZ"}.get(k_rank, "BSH_BSND")
            if self.in_layout != "TND":
                if self.rope or self.kv_nz:
                    if k_rank not in (3, 4, 5):
                        _fail("key", self.k.shape, "a paged key cache must have 3, 4 or 5 dims")
                else:
                    self.in_layout = "BSH_BSND" if k_rank == 3 else "BNSD"
            bnsd_query = (self.layout in ("BNSD", "TND", "TND_NTD", "BNSD_NBSD") or p.inner_precise == 2)
            mla_full_quant = (self.q_dtype == "int8" and self.kv_dtype == "int8" and self.rope and self.d == 512)
            if mla_full_quant and k_rank == 4:
                _fail("key", self.k.shape, "MLA with an int8 query needs an NZ (5-D) paged cache")
            if not mla_full_quant and k_rank == 4 and not bnsd_query:
                _fail("input_layout", self.layout, "a 4-D paged cache needs a BNSD or TND query layout")
            return
        keys = p.key_list or (p.key,)
        values = p.value_list or (p.value,)
        b_q, b_k = dim(self.q.shape, 0), dim(self.k.shape, 0)
        count = b_q if b_q != b_k else 1
        first = keys[0].shape
        for i in range(count):
            if i >= len(keys) or i >= len(values):
                _fail("key", len(keys), f"a key/value tensor list needs at least B of query ({b_q}) tensors")
            ks, vs = keys[i].shape, values[i].shape
            if tuple(ks) != tuple(vs):
                _fail("value", vs, f"key and value tensor {i} must have one shape (key {list(ks)})")
            if b_q != b_k:
                self._list_entry(i, ks, vs)
            for ax in range(len(ks)):
                if self._is_s_axis(ax):
                    continue
                if dim(first, ax) != ks[ax]:
                    _fail("key", ks, f"key tensors may differ only in S (axis {ax} of tensor {i})")
            seq = ks[1] if self.in_layout == "BSH_BSND" else dim(ks, 2)
            if seq != 0 and numel(ks) == 0:
                seq = 0
            self.s_max = max(self.s_max, seq)
            self.kv_seq_lens.append(seq)
        self.kv_layout = self.in_layout

    def _is_s_axis(self, ax: int) -> bool:
        return (self.layout == "BNSD" and ax == 2) or (self.layout in ("BSND", "BSH") and ax == 1)

    def _list_entry(self, i: int, ks, vs) -> None:
        rank = {"BSH": 3, "BNSD": 4, "BSND": 4, "TND": 3}.get(self.layout)
        if rank is not None and (len(ks) != rank or len(vs) != rank):
            _fail("key", ks, f"tensors of a key/value list must have {rank} dims with {self.layout}")
        if dim(ks, 0) != 1:
            _fail("key", ks, f"tensor {i} of a key/value list must have batch 1")
        for name, s in (("key", ks), ("value", vs)):
            if self.layout == "BSH":
                heads = dim(s, 2) // self.d if self.d else 0
            elif self.layout == "BSND":
                heads = dim(s, 2)
            elif self.layout in ("TND", "BNSD"):
                heads = dim(s, 1)
            else:
                heads = 0
            if heads != self.n2:
                _fail(name, s, f"tensor {i} of the list must have {self.n2} heads")

    def _qk_out_shapes(self) -> None:
        if self.paged:
            return
        q, k = self.q.shape, (self.p.key_list or (self.p.key,))[0].shape
        out = self.out.shape
        layout = self.layout
        if layout in ("BSH", "BSH_NBSD"):
            want_out = 3 if layout == "BSH" else 4
            if len(q) != 3 or len(k) != 3 or len(out) != want_out:
                _fail("query", q, f"with {layout} query and key need 3 dims and attention_out {want_out}")
            if q[1] != 1 and not self.rope and not self.mtp:
                _fail("query", q, "with BSH the query length must be 1")
            if q[2] // self.n != k[2] // self.n2:
                _fail("key", k, "with BSH the head dim of key must equal that of query")
        elif layout in ("TND", "TND_NTD"):
            if len(q) != 3 or len(k) != 3 or len(out) != 3:
                _fail("query", q, f"with {layout} query, key and attention_out need 3 dims")
            if q[1] // self.n != k[1] // self.n2:
                _fail("key", k, "with TND the head axes of query and key must agree")
        else:
            if len(q) != 4 or len(k) != 4 or len(out) != 4:
                _fail("query", q, f"with {layout} query, key and attention_out need 4 dims")
            if q[3] != k[3]:
                _fail("key", k, "the head dim of key must equal that of query")

    def _formats_and_limits(self) -> None:
        p = self.p
        for name in ("query", "key", "value", "atten_mask", "kv_padding_size", "key_shared_prefix",
                     "value_shared_prefix", "antiquant_scale", "antiquant_offset", "key_antiquant_scale",
                     "key_antiquant_offset", "value_antiquant_scale", "value_antiquant_offset"):
            t = self.v if name == "value" else getattr(p, name)
            if present(t) and t.format not in _FORMATS:
                _fail(name, t.format, "format must be ND, NCHW, NHWC or NCDHW")
        if not self.rope and self.g > 64:
            _fail("num_heads", self.n, f"num_heads / num_key_value_heads ({self.g}) must be <= 64 without rope")
        if not self.rope and self.q_dtype == "int8" and self.kv_dtype == "int8":
            _fail("query", "int8", "int8 query with int8 key/value needs query_rope/key_rope")
        if self.q_dtype == "float16" and self.kv_dtype not in ("float16", "int8", "int4"):
            _fail("key", self.kv_dtype, "an fp16 query takes fp16, int8 or int4 key/value")
        if self.q_dtype == "bfloat16" and self.kv_dtype not in ("bfloat16", "int8", "int4"):
            _fail("key", self.kv_dtype, "a bf16 query takes bf16, int8 or int4 key/value")
        if self.paged:
            bs = _u32(p.block_size)
            if self.kv_dtype in ("float16", "bfloat16") and bs % 16 != 0:
                _fail("block_size", p.block_size, "block_size must be a multiple of 16 for fp16/bf16 caches")
            if self.kv_dtype == "int8" and bs % 32 != 0:
                _fail("block_size", p.block_size, "block_size must be a multiple of 32 for int8 caches")
        if self.b > 65536:
            _fail("query", self.q.shape, f"batch ({self.b}) must be <= 65536")
        if not self.rope and self.d > 512:
            _fail("query", self.q.shape, f"head dim ({self.d}) must be <= 512")
        if not self.rope and self.n2 > 256:
            _fail("num_key_value_heads", self.n2, "must be <= 256")

    # --------------------------------------------------------------------------------------- roll-back
    def _roll_back(self) -> None:
        if self.s_max == 0 or self.paged:
            return
        if self.d >= 1024:
            _fail("query", self.q.shape, "the IFA route has no kernel for a head dim >= 1024")
        if (self.q_dtype, self.out_dtype) not in _IN_OUT_NEW:
            _fail("attention_out", self.out_dtype,
                  f"the IFA route has no kernel for query {self.q_dtype} with attention_out {self.out_dtype}")

    # --------------------------------------------------------------------------------- optional inputs
    def _optional_inputs(self) -> None:
        self._actual_seq()
        self._pse()
        self._per_layer_quant()
        self._post_quant()
        self._full_quant()
        self._mask()
        self._paged()
        self._kv_padding()
        self._mla_rope()
        if self.cv_ratio == 1 and not (self.quant and self.rope):
            _fail("platform", (self.plat.aic, self.plat.aiv), "with 1:1 cores only MLA full quant is supported")
        self._prefix()
        self._antiquant_scale()
        if self.kv_nz:
            self._gqa_nz()

    #: the optional inputs IFATiling's GQA NZ template takes none of (``CheckGqaTensorEmpty``)
    _GQA_NZ_ABSENT = ("pse_shift", "dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2",
                      "quant_offset2", "antiquant_scale", "antiquant_offset", "query_padding_size", "kv_padding_size",
                      "key_antiquant_offset", "value_antiquant_offset", "key_shared_prefix", "value_shared_prefix",
                      "actual_shared_prefix_len", "query_rope", "key_rope", "key_rope_antiquant_scale",
                      "dequant_scale_query")

    def _gqa_nz(self) -> None:
        """``ProcessGqaKvNz``: the GQA template with an NZ (5-D) paged cache takes KV antiquant only, a bf16 query
        and output with an int8 cache of (blocks, N, D/32, block_size, 32), the key's and the value's own scales
        (per channel bf16 with modes 0, per token fp32 with modes 1) and none of ``_GQA_NZ_ABSENT``, no query
        lengths outside TND and no lse; D 128, BSH/BSND/BNSD/TND, block size 128 or 512, inner_precise 1; a query
        S of 1 takes sparse_mode 0 (TND: or 3), a longer one sparse_mode 3, with the mask only for sparse 3."""
        p = self.p
        if not self.anti_quant:
            _fail("key", self.kv_dtype, "an NZ cache on the GQA route takes KV antiquant only")
        for name, dt in (("query", self.q_dtype), ("key", self.kv_dtype), ("value", p.value.dtype),
                         ("attention_out", self.out_dtype)):
            want = "int8" if name in ("key", "value") else "bfloat16"
            if dt != want:
                _fail(name, dt, f"an NZ cache on the GQA route takes a {want} {name}")
        for name in ("key", "value"):
            shape = tuple(getattr(p, name).shape)
            if 0 in shape or shape[2] != self.d // 32 or shape[4] != 32:
                _fail(name, shape, f"an NZ int8 cache is (blocks, N, {self.d // 32}, block_size, 32)")
        ks, vs = p.key_antiquant_scale, p.value_antiquant_scale
        if not (present(ks) and present(vs)):
            _fail("key_antiquant_scale", None, "an NZ cache on the GQA route needs the key's and the value's scales")
        km, vm = p.key_antiquant_mode, p.value_antiquant_mode
        want_dt = "float32" if km == 1 else "bfloat16"
        for name, t in (("key_antiquant_scale", ks), ("value_antiquant_scale", vs)):
            if t.dtype != want_dt:
                _fail(name, t.dtype, f"an NZ cache's {'per-token' if km == 1 else 'per-channel'} scales are {want_dt}")
        for name in self._GQA_NZ_ABSENT + (() if self.layout == "TND" else ("actual_seq_lengths",)):
            if present(getattr(p, name, None)):
                _fail(name, getattr(p, name).shape, "an NZ cache on the GQA route does not take it")
        if p.softmax_lse_flag:
            _fail("softmax_lse_flag", True, "an NZ cache on the GQA route gives no softmax_lse")
        if self.d != 128:
            _fail("query", self.q.shape, f"an NZ cache on the GQA route takes a head dim of 128, not {self.d}")
        if self.layout not in ("BSH", "BSND", "BNSD", "TND"):
            _fail("input_layout", self.layout, "an NZ cache on the GQA route takes BSH, BSND, BNSD or TND")
        if (km, vm) not in ((0, 0), (1, 1)):
            _fail("key_antiquant_mode", (km, vm), "an NZ cache's key/value modes are both 0 or both 1")
        if p.block_size not in (128, 512):
            _fail("block_size", p.block_size, "an NZ cache on the GQA route takes block_size 128 or 512")
        if p.inner_precise != 1:
            _fail("inner_precise", p.inner_precise, "an NZ cache on the GQA route takes inner_precise 1")
        sparse, mask = p.sparse_mode, present(p.atten_mask)
        ok = sparse in ((0, 3) if self.layout == "TND" else (0,)) if self.q_s == 1 else sparse == 3
        if not ok:
            _fail("sparse_mode", sparse, f"an NZ cache on the GQA route with a query S of {self.q_s} takes "
                                         f"{'sparse_mode 0' if self.q_s == 1 else 'sparse_mode 3'}")
        if mask != (sparse == 3):
            _fail("atten_mask", p.atten_mask.shape if mask else None,
                  "an NZ cache on the GQA route takes a mask with sparse_mode 3 only")

    def _antiquant_scale(self) -> None:
        """``ProcessAntiQuant``: with KV antiquant the scale must exist (``antiquant_scale``, or
        ``key_antiquant_scale`` when key and value carry their own); then the rules of key and value
        parameters of their own (``CheckKeyAndValueAntiquantOffset``) and the GQA NZ cache's per-channel
        shapes (``CheckGqaAntiQuantPerChannel``)."""
        p = self.p
        if self.anti_quant and not self.rope and not (present(p.antiquant_scale) or present(p.key_antiquant_scale)):
            _fail("antiquant_scale", None, "KV antiquant (int8/int4 key/value) needs antiquant_scale or "
                                           "key_antiquant_scale")
        if self.anti_quant and not self.rope:
            split = self._split_antiquant_params()
            self._antiquant_param(split)

    def _split_antiquant_params(self) -> bool:
        """op_host's pairing checks (a key/value scale or offset given for one side only; a key offset without the
        key's scale), then ``CheckKeyAndValueAntiquantOffset``: unless the key is per channel and the value per
        token (modes 0/1),
        the key's and the value's offsets share a dtype and a shape, and so do their scales. True when both
        scales are given (op_host's ``kvAntiParamSplitFlag_``)."""
        p = self.p
        mixed = (p.key_antiquant_mode, p.value_antiquant_mode) == (0, 1)
        ko, vo = p.key_antiquant_offset, p.value_antiquant_offset
        for a, b, what in ((p.key_antiquant_scale, p.value_antiquant_scale, "scale"), (ko, vo, "offset")):
            if present(a) != present(b):   # op_host's pairing checks, before the shapes
                given, missing = ("key", "value") if present(a) else ("value", "key")
                _fail(f"{missing}_antiquant_{what}", None, f"the {given}'s antiquant {what} is given, so the "
                                                          f"{missing}'s must be too")
        if present(ko) and not present(p.key_antiquant_scale):
            _fail("key_antiquant_scale", None, "the key's antiquant offset needs the key's antiquant scale")
        if present(ko) and present(vo) and not mixed:
            if ko.dtype != vo.dtype:
                _fail("value_antiquant_offset", vo.dtype, f"the key's and the value's antiquant offsets share a "
                                                          f"dtype ({ko.dtype})")
            if tuple(ko.shape) != tuple(vo.shape):
                _fail("value_antiquant_offset", tuple(vo.shape), f"the key's and the value's antiquant offsets "
                                                                 f"share a shape ({tuple(ko.shape)})")
        ks, vs = p.key_antiquant_scale, p.value_antiquant_scale
        if not (present(ks) and present(vs)):
            return False
        if not mixed and tuple(ks.shape) != tuple(vs.shape):
            _fail("value_antiquant_scale", tuple(vs.shape), f"the key's and the value's antiquant scales share a "
                                                            f"shape ({tuple(ks.shape)})")
        return True

    def _antiquant_param(self, split: bool) -> None:
        """``ProcessAntiQuantMode`` / ``CheckAntiQuantParam`` for the scale (the key's, when key and value carry
        their own) and its offset: the effective mode (split: the key's mode, 2 meaning per channel per head,
        3-5 per token; key 0 with value 1 is mode 2; combined: ``antiquant_mode`` in 0..2), the offset of the
        scale's rank, the per-channel shapes (``CheckKVAntiQuantParaShapeLegal``: per tensor (A,), per channel
        (A, N2, 1, D), (A, 1, N2, D), (A, N2, D) or (A, N2*D) with A = 1 for split parameters, else 2; an NZ
        cache's own shapes; per tensor per head (N2,)) and the dtypes (per channel: the query's; per token:
        float32; the offset: the scale's); per token (``_per_token_shape``) unless the paged cache holds them."""
        p = self.p
        if split:
            km, vm = p.key_antiquant_mode, p.value_antiquant_mode
            if (km, vm) == (0, 1):
                mode, per_head, paged_params = 2, False, False
            elif km != vm:
                _fail("value_antiquant_mode", vm, f"the key's and the value's antiquant modes must be equal "
                                                  f"(or 0 and 1), got {km} and {vm}")
            elif self.kv_nz and km not in (0, 1):
                _fail("key_antiquant_mode", km, "an NZ cache takes antiquant mode 0 or 1")
            elif self.kv_nz and self.layout == "TND" and km == 1:
                _fail("key_antiquant_mode", km, "an NZ cache with TND takes no per-token antiquant")
            elif km not in range(6):
                _fail("key_antiquant_mode", km, "antiquant modes are 0-5")
            else:
                mode = {0: 0, 1: 1, 2: 0, 3: 1, 4: 1, 5: 1}[km]
                per_head, paged_params = km in (2, 3, 5), km in (4, 5)
                if paged_params and not self.paged:
                    _fail("key_antiquant_mode", km, "antiquant modes 4/5 manage their parameters in the paged "
                                                    "cache: they need a block_table")
            scale, offset, sname, oname = (p.key_antiquant_scale, p.key_antiquant_offset, "key_antiquant_scale",
                                           "key_antiquant_offset")
        else:
            mode, per_head, paged_params = p.antiquant_mode, False, False
            if mode not in (0, 1, 2):
                _fail("antiquant_mode", mode, "antiquant_mode must be 0, 1 or 2")
            scale, offset, sname, oname = p.antiquant_scale, p.antiquant_offset, "antiquant_scale", "antiquant_offset"
        if not present(scale):
            return
        if present(offset) and len(offset.shape) != len(scale.shape):
            _fail(oname, tuple(offset.shape), f"{oname} must have the rank of {sname} ({len(scale.shape)})")
        for name, t in ((sname, scale), (oname, offset)):
            if present(t):
                self._antiquant_shape(name, tuple(t.shape), mode, per_head, paged_params, 1 if split else 2, split)
        if mode == 0 and scale.dtype != self.q_dtype:
            _fail(sname, scale.dtype, f"per-channel antiquant scales have the query's dtype ({self.q_dtype})")
        if mode == 1 and scale.dtype != "float32":
            _fail(sname, scale.dtype, "per-token antiquant scales are float32")
        if mode == 2 and split:   # key per channel, value per token
            if scale.dtype != self.q_dtype:
                _fail(sname, scale.dtype, f"the per-channel key scale has the query's dtype ({self.q_dtype})")
            vs = p.value_antiquant_scale
            if vs.dtype != "float32":
                _fail("value_antiquant_scale", vs.dtype, "the per-token value scale is float32")
            vo = p.value_antiquant_offset
            if present(vo) and vo.dtype != vs.dtype:
                _fail("value_antiquant_offset", vo.dtype, "the value's antiquant offset has its scale's dtype")
        if present(offset) and offset.dtype != scale.dtype:
            _fail(oname, offset.dtype, f"{oname} has the dtype of {sname} ({scale.dtype})")

    def _antiquant_shape(self, name: str, s: tuple, mode: int, per_head: bool, paged_params: bool, a: int,
                         split: bool) -> None:
        if mode == 0 and self.kv_nz and len(s) in (1, 2, 3):
            if split:
                self._gqa_nz_per_channel(name, s)
            elif len(s) in (2, 3):
                self._per_channel_shape(name, s, a)
            return
        if per_head and not paged_params:   # CheckKVAntiQuantPerHead
            seq = self.s_max or 1024
            if mode == 0 and s != (self.n2,):
                _fail(name, s, f"per-tensor per-head antiquant parameters are ({self.n2},)")
            if mode == 1 and (len(s) != 3 or s[0] != self.b or s[1] != self.n2 or s[2] < seq):
                _fail(name, s, f"per-token per-head antiquant parameters are ({self.b}, {self.n2}, S') with "
                               f"S' >= {seq}")
            return
        if mode == 1:
            if not paged_params:
                self._per_token_shape(name, s, a, split)
            return
        if len(s) == 1:
            if s != (a,):
                _fail(name, s, f"per-tensor antiquant parameters are ({a},)")
        elif len(s) in (2, 3, 4):
            self._per_channel_shape(name, s, a)
        else:
            _fail(name, s, f"per-channel antiquant parameters have 1-4 dims, not {len(s)}")

    def _per_token_shape(self, name: str, s: tuple, a: int, split: bool) -> None:
        """``CheckKVAntiQuantPerToken``: (A, B, S') or, for the key's and the value's own parameters, (B, S'),
        with S' at least the longest KV op_host sizes for (``seqSize_``: the key's S, a list's longest, a paged
        table's width x block_size; 1024 for an empty cache); an NZ cache's (B, S') only."""
        seq = self.s_max or 1024
        if self.kv_nz or (len(s) == 2 and split):
            if len(s) != 2 or s[0] != self.b or s[1] < seq:
                _fail(name, s, f"per-token antiquant parameters are ({self.b}, S') with S' >= {seq}")
        elif len(s) == 3:
            if s[0] != a or s[1] != self.b or s[2] < seq:
                _fail(name, s, f"per-token antiquant parameters are ({a}, {self.b}, S') with S' >= {seq}")
        else:
            _fail(name, s, f"per-token antiquant parameters are ({a}, {self.b}, S')"
                           + (f" or ({self.b}, S')" if split else "") + f" with S' >= {seq}")

    def _per_channel_shape(self, name: str, s: tuple, a: int) -> None:
        """``CheckKVAntiQuantPerChannel``: (A, N2, 1, D), (A, 1, N2, D), (A, N2, D) or (A, N2*D)."""
        n2, d = self.n2, self.d
        if s not in ((a, n2, 1, d), (a, 1, n2, d), (a, n2, d), (a, n2 * d)):
            _fail(name, s, f"per-channel antiquant parameters are [{a}, {n2}, 1, {d}], [{a}, 1, {n2}, {d}], "
                           f"[{a}, {n2}, {d}] or [{a}, {n2 * d}]")

    def _gqa_nz_per_channel(self, name: str, shape: tuple) -> None:
        """``CheckKVAntiQuantParaShapeLegal`` / ``CheckGqaAntiQuantPerChannel``: per-channel parameters of an NZ
        cache with 3, 2 or 1 dims are checked against the input layout's own shape: BNSD (N2, 1, D), BSND and
        TND (N2, D), BSH (N2*D,) (another layout string is not checked there)."""
        want = {"BNSD": (self.n2, 1, self.d), "BSND": (self.n2, self.d), "TND": (self.n2, self.d),
                "BSH": (self.n2 * self.d,)}.get(self.layout)
        if want is not None and shape != want:
            _fail(name, shape, f"per-channel antiquant parameters of an NZ cache with layout {self.layout} must be "
                               f"{list(want)}")

    def _actual_seq(self) -> None:
        """``ProcessActualSeqLen`` / ``ParseActualSeqLens``: the kv lengths' count and values; the longest
        (``maxActualseq_``). TND starts it at the cache's S (``sMax_``) and raises it to the longest raw value,
        which the paged check then holds to the table."""
        p = self.p
        self.max_actual = self.s_max
        akv = p.actual_seq_lengths_kv
        tnd = self.in_layout == "TND"
        if not present(akv):
            if self.paged and not self.sink and not tnd:
                _fail("actual_seq_lengths_kv", None, "a paged call needs actual_seq_lengths_kv")
            return
        n = numel(akv.shape)
        if n == 0 or (tnd and self.sink):
            return
        if n != 1 and n < self.b and not tnd:
            _fail("actual_seq_lengths_kv", n, f"must have 1 or at least B ({self.b}) entries")
        data = akv.data
        if data is None:
            return
        n = n if tnd else min(n, self.b)
        loop = 1 if (n == 1 and len(self.kv_seq_lens) == 1) else self.b
        longest = 0
        for i in range(loop):
            idx = 0 if n == 1 else i
            length = data[idx] if idx < len(data) else 0
            if length < 0:
                _fail("actual_seq_lengths_kv", tuple(data), f"entry {i} ({length}) must be >= 0")
            if not self.paged and self.kv_seq_lens:
                cap = self.kv_seq_lens[0] if len(self.kv_seq_lens) == 1 else self.kv_seq_lens[i]
                if length > cap:
                    _fail("actual_seq_lengths_kv", tuple(data),
                          f"entry {i} ({length}) must be <= S of key ({cap})")
            longest = max(longest, length)
        self.max_actual = max(self.max_actual, longest) if tnd else longest

    def _pse(self) -> None:
        pse = self.p.pse_shift
        self.pse_s = None
        if not present(pse):
            return
        if self.kv_nz:
            _fail("pse_shift", pse.shape, "pse_shift is not supported with an NZ key/value cache")
        if pse.dtype not in ("float16", "bfloat16"):
            _fail("pse_shift", pse.dtype, "pse_shift must be fp16 or bf16")
        if self.q_dtype != "int8" and self.q_dtype != pse.dtype:
            _fail("pse_shift", pse.dtype, f"pse_shift must have the query dtype ({self.q_dtype})")
        s = pse.shape
        if len(s) != 4:
            _fail("pse_shift", s, "pse_shift must have 4 dims")
        if (s[0] != 1 and s[0] != self.b) or s[1] != self.n or s[2] != 1:
            _fail("pse_shift", s, f"pse_shift must be [B or 1, {self.n}, 1, S]")
        if s[3] < self.s_max:
            _fail("pse_shift", s, f"the last axis of pse_shift must be >= the longest key/value ({self.s_max})")
        self.pse_s = s[3]

    def _per_layer_quant(self) -> None:
        if self.q_dtype == "int8":
            return
        for name in ("dequant_scale1", "quant_scale1", "dequant_scale2"):
            if present(getattr(self.p, name)):
                _fail(name, getattr(self.p, name).shape, "only an int8 query takes this input")

    def _post_quant(self) -> None:
        p = self.p
        scale, offset = p.quant_scale2, p.quant_offset2
        if self.out_dtype != "int8":
            if present(scale):
                _fail("quant_scale2", scale.shape, "quant_scale2 needs an int8 attention_out")
            if present(offset):
                _fail("quant_offset2", offset.shape, "quant_offset2 needs an int8 attention_out")
            return
        if not present(scale):
            _fail("quant_scale2", None, "an int8 attention_out needs quant_scale2")
        if scale.dtype not in ("bfloat16", "float32"):
            _fail("quant_scale2", scale.dtype, "quant_scale2 must be bf16 or fp32")
        if present(offset) and offset.dtype != scale.dtype:
            _fail("quant_offset2", offset.dtype, f"quant_offset2 must have the dtype of quant_scale2 ({scale.dtype})")
        if self.q_dtype != "bfloat16" and scale.dtype == "bfloat16":
            _fail("quant_scale2", scale.dtype, "a bf16 quant_scale2 needs a bf16 query")
        if self.kv_dtype == "int4":
            _fail("quant_scale2", scale.shape, "post-quant is not supported with int4 key/value")
        for name, t in (("quant_scale2", scale), ("quant_offset2", offset)):
            if present(t) and numel(t.shape) != 1 and not self._post_quant_shape_ok(t.shape):
                _fail(name, t.shape, f"must be per-channel over N*D ({self.n} x {self.d})")

    def _post_quant_shape_ok(self, s) -> bool:
        n, d = self.n, self.d
        if len(s) not in (1, 2, 3, 4):
            return True
        return tuple(s) in {(1, n, 1, d), (n, 1, d), (n, d), (1, 1, n, d), (1, n, d), (1, n * d), (1, 1, n * d),
                            (n * d,)}

    def _full_quant(self) -> None:
        p = self.p
        if self.q_dtype != "int8":
            if present(p.dequant_scale_query):
                _fail("dequant_scale_query", p.dequant_scale_query.shape, "only an int8 query takes it")
            return
        if not self.rope:
            _fail("query_rope", None, "an int8 query needs query_rope and key_rope")
        if self.in_layout == "BNSD":
            _fail("input_layout", self.layout, "an int8 query does not support BNSD")
        for name in ("quant_scale1", "dequant_scale1", "dequant_scale2", "antiquant_scale", "antiquant_offset",
                     "key_antiquant_offset", "value_antiquant_offset"):
            if present(getattr(p, name)):
                _fail(name, getattr(p, name).shape, "not supported with an int8 query")
        for name in ("dequant_scale_query", "key_antiquant_scale", "value_antiquant_scale"):
            if not present(getattr(p, name)):
                _fail(name, None, "an int8 query needs the query, key and value dequant scales")
        self._full_quant_scale_shapes()
        if p.query_quant_mode != 3:
            _fail("query_quant_mode", p.query_quant_mode, "an int8 query needs query_quant_mode 3")
        if p.key_antiquant_mode != 0 or p.value_antiquant_mode != 0:
            _fail("key_antiquant_mode", (p.key_antiquant_mode, p.value_antiquant_mode),
                  "an int8 query needs key/value quant mode 0")
        for name in ("dequant_scale_query", "key_antiquant_scale", "value_antiquant_scale"):
            if getattr(p, name).dtype != "float32":
                _fail(name, getattr(p, name).dtype, "must be fp32 with an int8 query")
        for name in ("query_rope", "key_rope"):
            if getattr(p, name).dtype != "bfloat16":
                _fail(name, getattr(p, name).dtype, "must be bf16 with an int8 query")
        self.quant = True

    def _mask(self) -> None:
        p = self.p
        sparse = _u32(p.sparse_mode)
        mask = p.atten_mask if present(p.atten_mask) else None
        self.mask_flag, self.mask_s = False, 0
        if self.in_layout == "TND":
            if sparse == 0:
                if mask is not None:
                    _fail("atten_mask", mask.shape, "TND with sparse_mode 0 takes no mask")
            elif sparse == 3:
                if mask is None:
                    _fail("atten_mask", None, "TND with sparse_mode 3 needs a mask")
                if tuple(mask.shape) != (2048, 2048):
                    _fail("atten_mask", mask.shape, "TND with sparse_mode 3 needs a [2048, 2048] mask")
                self.mask_flag = True
            elif sparse == 9:
                # a TND tree mask that breaks its rules is simply not used
                self.mask_flag = self._tree_ok() and mask is not None and len(mask.shape) == 1 and (
                    self.sink or mask.shape[0] == self.q_sq_sum)
            else:
                _fail("sparse_mode", p.sparse_mode, "TND takes sparse_mode 0, 3 or 9")
            return
        self._mla_sparse(sparse, mask)
        if sparse == 9 and not self._tree_ok():
            _fail("sparse_mode", 9, "sparse_mode 9 needs MLA full quant with the query length <= S of key/value")
        if mask is None or numel(mask.shape) == 0:
            return
        if sparse == 9 and tuple(mask.shape) == (self.b, self.q_s, self.q_s):
            self.mask_flag = True
            return
        if mask.dtype not in ("bool", "int8", "uint8"):
            _fail("atten_mask", mask.dtype, "atten_mask must be bool, int8 or uint8")
        if sparse in (3, 4) or self.mtp:
            if sparse not in (0, 1) and tuple(mask.shape) != (2048, 2048):
                _fail("atten_mask", mask.shape, f"sparse_mode {sparse} needs a [2048, 2048] mask")
            self.mask_flag = True
            return
        if dim(mask.shape, 0) != self.b:
            _fail("atten_mask", mask.shape, f"batch of atten_mask must equal B ({self.b})")
        self.mask_s = mask.shape[-1]
        need = self.s_max if self.paged else self.max_actual
        if self.mask_s < need:
            _fail("atten_mask", mask.shape, f"the last axis of atten_mask must be >= {need}")
        self.mask_flag = True

    def _mla_sparse(self, sparse: int, mask) -> None:
        if not self.rope:
            return
        s = self.q_s
        if self.quant:
            allowed = (3, 9) if s > 1 else (0,)
        elif self.anti_quant:
            allowed = (3,) if s > 1 else (0,)
        else:
            allowed = (3, 4) if s > 1 else (0, 4)
        if sparse not in allowed:
            _fail("sparse_mode", sparse, f"MLA with query length {s} takes sparse_mode {allowed}")
        if (s > 1 or sparse == 4) and mask is None:
            _fail("atten_mask", None, "MLA needs a [2048, 2048] mask here")
        if s == 1 and mask is not None and sparse != 4:
            _fail("atten_mask", mask.shape, "MLA with query length 1 takes no mask (unless sparse_mode 4)")

    def _tree_ok(self) -> bool:
        """sparse_mode 9 (tree mask) needs MLA full quant and, with values, each query length <= its kv length."""
        if not (self.rope and self.quant):
            return False
        if self.sink:
            return True
        if self.in_layout == "TND":
            aq, akv = self.p.actual_seq_lengths.data, self.p.actual_seq_lengths_kv.data
            for i in range(self.len_q_dims):
                kv = akv[i] if i < len(akv) else 0
                if kv == 0:
                    continue
                q = aq[0] if i == 0 else aq[i] - aq[i - 1]
                if q > kv:
                    return False
            return True
        return self.q_s <= self.s_max

    def _paged(self) -> None:
        if not self.paged:
            return
        p = self.p
        if self.in_layout == "BSH_BSND":
            if self.n2 * self.d > _ND2NZ_STRIDE_MAX:
                _fail("key", self.k.shape, f"N*D of a BSH cache ({self.n2 * self.d}) must be <= 65535")
            if self.sliding and self.n2 * self.dv > _ND2NZ_STRIDE_MAX:
                _fail("value", self.v.shape, "N*D of a BSH value cache must be <= 65535")
        bs = _u32(p.block_size)
        if bs == 0:
            _fail("block_size", p.block_size, "a paged call needs block_size > 0")
        if bs > _BLOCK_SIZE_MAX:
            _fail("block_size", p.block_size, f"block_size must be <= {_BLOCK_SIZE_MAX}")
        if self.kv_dtype == "int8" and bs % 32 != 0:
            _fail("block_size", p.block_size, "block_size must be a multiple of 32 for int8 caches")
        if self.kv_dtype in ("float16", "bfloat16") and bs % 16 != 0:
            _fail("block_size", p.block_size, "block_size must be a multiple of 16 for fp16/bf16 caches")
        if self.max_actual > bs * self.max_blocks:
            _fail("actual_seq_lengths_kv", self.max_actual,
                  f"the longest key/value ({self.max_actual}) exceeds block_size * table columns "
                  f"({bs} x {self.max_blocks})")

    def _kv_padding(self) -> None:
        pad = self.p.kv_padding_size
        self.kv_padding = False
        if not present(pad) or numel(pad.shape) == 0:
            return
        if self.kv_dtype == "int4":
            _fail("kv_padding_size", pad.shape, "kv left padding is not supported with int4 key/value")
        if self.rope:
            _fail("kv_padding_size", pad.shape, "kv left padding is not supported with MLA")
        self.kv_padding = (not self.paged and getattr(self, "batch_contiguous", False)
                           and present(self.p.actual_seq_lengths_kv))

    def _full_quant_scale_shapes(self) -> None:
        """``CheckQueryQuantParam4FullQuant`` / ``CheckKVQuantParam4FullQuant``: the query scale is the query's
        shape without D ((B, S, num_heads) for BSH), the key and value scales are (1,)."""
        p, q = self.p, tuple(self.q.shape)
        s = tuple(p.dequant_scale_query.shape)
        if self.layout in ("BSH", "BSH_NBSD"):
            want = (dim(q, 0), dim(q, 1), self.n)
            ok = len(s) == len(q) and s == want
        else:
            want = q[:-1]
            ok = s == want
        if not ok:
            _fail("dequant_scale_query", s, f"with an int8 query its shape is the query's without D, {want} "
                                            "(CheckQueryQuantParam4FullQuant)")
        for name in ("key_antiquant_scale", "value_antiquant_scale"):
            ks = tuple(getattr(p, name).shape)
            if ks != (1,):
                _fail(name, ks, "with an int8 query (MLA) the key/value dequant scale is (1,)")

    def _mla_rope(self) -> None:
        """``ProcessMlaRope``: the rope tensors' dtypes and shapes, the MLA attributes and cache rules."""
        if not self.rope:
            return
        p = self.p
        qr, kr, q, k = p.query_rope, p.key_rope, self.q.shape, self.k.shape
        want = "bfloat16" if self.quant else self.q_dtype                  # CheckMlaQueryRopeDesc
        if qr.dtype != want:
            _fail("query_rope", qr.dtype, f"query_rope must be {want}" + (" with an int8 query" if self.quant
                                                                          else " (the query's dtype)"))
        qs = tuple(qr.shape)
        if len(qs) != len(q):
            _fail("query_rope", qs, f"query_rope must have the query's rank ({len(q)})")
        if self.in_layout == "BSH_BSND":
            if dim(qs, 0) != dim(q, 0) or dim(qs, 1) != dim(q, 1) or (len(qs) == 4 and dim(qs, 2) != dim(q, 2)):
                _fail("query_rope", qs, f"query_rope must have the query's B, S (and N) ({tuple(q)})")
            rope_d = dim(qs, 3) if len(qs) == 4 else dim(qs, 2) // self.n
        elif self.in_layout == "BNSD":
            if any(dim(qs, i) != dim(q, i) for i in range(3)):
                _fail("query_rope", qs, f"query_rope must have the query's B, N and S ({tuple(q)})")
            rope_d = dim(qs, 3)
        else:
            if dim(qs, 0) != dim(q, 0) or dim(qs, 1) != dim(q, 1):
                _fail("query_rope", qs, f"query_rope must have the query's T and N ({tuple(q)})")
            rope_d = dim(qs, 2)
        if self.n2 != 1:                                                      # CheckMlaAttrs
            _fail("num_key_value_heads", p.num_key_value_heads, "MLA takes one key/value head")
        if self.g not in (1, 2, 4, 8, 16, 32, 64, 128):
            _fail("num_heads", self.n, f"MLA takes G (num_heads / num_key_value_heads = {self.g}) of 1-128, "
                                       "a power of 2")
        if self.d != 512:
            _fail("query", tuple(q), f"MLA takes D 512 (not {self.d})")
        if rope_d != 64:
            _fail("query_rope", qs, f"MLA takes a rope dim of 64 (not {rope_d})")
        if self.kv_layout == "NZ" and self.in_layout not in ("BSH_BSND", "TND"):
            _fail("input_layout", self.layout, "MLA with an NZ cache takes BSH, BSND or TND (and their NBSD/NTD "
                                               "outputs)")
        if not self.paged:                                                    # CheckMlaKeyRope
            _fail("block_table", None, "MLA needs a paged cache")
        want = qr.dtype if self.quant else self.kv_dtype
        if kr.dtype != want:
            _fail("key_rope", kr.dtype, f"key_rope must be {want}" + (" (query_rope's dtype with an int8 query)"
                                                                      if self.quant else " (the key's dtype)"))
        ks = tuple(kr.shape)
        if numel(ks) == 0 or numel(k) == 0:
            _fail("key_rope" if numel(ks) == 0 else "key", ks if numel(ks) == 0 else tuple(k),
                  "MLA takes no empty key or key_rope")
        if dim(ks, 0) != dim(k, 0) or len(ks) != len(k):
            _fail("key_rope", ks, f"key_rope must have the key's block count and rank ({tuple(k)})")
        bs, n2 = _u32(p.block_size), self.n2
        if len(k) == 3:
            ok_k, ok_r = (dim(k, 1), dim(k, 2)) == (bs, n2 * 512), (dim(ks, 1), dim(ks, 2)) == (bs, n2 * 64)
        elif len(k) == 4:
            ok_k = (dim(k, 1), dim(k, 2), dim(k, 3)) == (n2, bs, 512)
            ok_r = (dim(ks, 1), dim(ks, 2), dim(ks, 3)) == (n2, bs, 64)
        else:
            c0, r0 = 32 // _SIZED.get(self.kv_dtype, 1), 32 // _SIZED.get(kr.dtype, 1)
            ok_k = tuple(dim(k, i) for i in range(1, 5)) == (n2, 512 // c0, bs, c0)
            ok_r = tuple(dim(ks, i) for i in range(1, 5)) == (n2, 64 // r0, bs, r0)
        if not ok_k:
            _fail("key", tuple(k), f"the MLA cache's shape does not fit block_size {bs} and D 512")
        if not ok_r:
            _fail("key_rope", ks, f"key_rope's shape does not fit block_size {bs} and the rope dim 64")
        if self.anti_quant:                                                   # CheckMlaMisc
            _fail("key", self.kv_dtype, "antiquant (a bf16/fp16 query on an int8 cache) is not supported in MLA")
        if present(p.pse_shift):
            _fail("pse_shift", p.pse_shift.shape, "pse_shift is not supported in MLA")
        if self.prefix:
            _fail("key_shared_prefix", None, "a shared prefix is not supported in MLA")
        if self.out_dtype == "int8":
            q2 = p.quant_scale2
            _fail("quant_scale2" if present(q2) else "attention_out", q2.shape if present(q2) else "int8",
                  "post-quant (an int8 output) is not supported in MLA")
        if self.kv_layout == "NZ" and bs != 128:
            _fail("block_size", p.block_size, "MLA with an NZ cache takes block_size 128")
        if bs not in (16, 128):
            _fail("block_size", p.block_size, "MLA takes block_size 16 or 128")

    def _prefix(self) -> None:
        p = self.p
        if not self.prefix:
            return
        kp, vp = p.key_shared_prefix, p.value_shared_prefix
        if not present(kp):
            _fail("key_shared_prefix", None, "key_shared_prefix and value_shared_prefix come together")
        if not present(vp):
            _fail("value_shared_prefix", None, "key_shared_prefix and value_shared_prefix come together")
        for name, t in (("key_shared_prefix", kp), ("value_shared_prefix", vp)):
            if t.dtype != self.kv_dtype:
                _fail(name, t.dtype, f"must have the key/value dtype ({self.kv_dtype})")
        if self.paged:
            _fail("key_shared_prefix", kp.shape, "a shared prefix is not supported with a paged cache")
        if self.kv_padding:
            _fail("key_shared_prefix", kp.shape, "a shared prefix is not supported with kv left padding")
        ks = kp.shape
        if tuple(ks) != tuple(vp.shape):
            _fail("value_shared_prefix", vp.shape, f"must have the shape of key_shared_prefix ({list(ks)})")
        if len(ks) != len(self.q.shape):
            _fail("key_shared_prefix", ks, "must have as many dims as query")
        if ks[0] != 1:
            _fail("key_shared_prefix", ks, "batch of the shared prefix must be 1")
        if self.in_layout == "BSH_BSND":
            if len(ks) == 3 and ks[2] != self.n2 * self.d:
                _fail("key_shared_prefix", ks, f"H must equal that of key ({self.n2 * self.d})")
            if len(ks) == 4 and (ks[2] != self.n2 or ks[3] != self.d):
                _fail("key_shared_prefix", ks, f"N and D must equal those of key ({self.n2}, {self.d})")
            s_prefix = dim(ks, 1)
        else:
            if dim(ks, 1) != self.n2 or dim(ks, 3) != self.d:
                _fail("key_shared_prefix", ks, f"N and D must equal those of key ({self.n2}, {self.d})")
            s_prefix = dim(ks, 2)
        if numel(ks) == 0:
            s_prefix = 0
        plen = p.actual_shared_prefix_len
        if not present(plen) or numel(plen.shape) == 0:
            return
        if len(plen.shape) != 1 or plen.shape[0] != 1:
            _fail("actual_shared_prefix_len", plen.shape, "actual_shared_prefix_len must be a 1-element list")
        if plen.data is None:
            return
        length = plen.data[0]
        if length < 0:
            _fail("actual_shared_prefix_len", length, "must be >= 0")
        if length > s_prefix:
            _fail("actual_shared_prefix_len", length, f"must be <= S of the shared prefix ({s_prefix})")
        total = length + self.max_actual
        if self.pse_s is not None and total > self.pse_s:
            _fail("pse_shift", self.p.pse_shift.shape, f"prefix + key/value length ({total}) exceeds pse_shift")
        if self.mask_flag and total > self.mask_s:
            _fail("atten_mask", self.p.atten_mask.shape, f"prefix + key/value length ({total}) exceeds atten_mask")
