// cvtile CPU twin: definitions of the API declared in ../decl/kernel_operator.h.
// Every function here repeats the declaration's signature; see ../README.md for the semantics.
// Written for cvtile.
#ifndef CVTILE_TWIN_API_H
#define CVTILE_TWIN_API_H

#include <algorithm>
#include <vector>

namespace cvtile_twin {

// ---------------------------------------------------------------- element helpers
template <typename T>
inline T Ld(const uint8_t* p)
{
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}
template <typename T>
inline void St(uint8_t* p, const T& v)
{
    std::memcpy(p, &v, sizeof(T));
}

template <typename T>
struct IsF16Like : std::integral_constant<bool, std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value> {};
template <typename T>
struct IsFloatish : std::integral_constant<bool, IsF16Like<T>::value || std::is_same<T, float>::value> {};

// W: the working type of an element (float for float/half/bfloat16, int64 for integers)
template <typename T, bool F = IsFloatish<T>::value>
struct Num;
template <typename T>
struct Num<T, true> {
    using W = float;
    static W Get(const T& v) { return static_cast<float>(v); }
    static T Put(W v) { return T(v); }
};
template <typename T>
struct Num<T, false> {
    using W = int64_t;
    static W Get(const T& v) { return static_cast<int64_t>(v); }
    static T Put(W v) { return static_cast<T>(static_cast<typename std::make_unsigned<T>::type>(v)); }
};

template <typename T>
inline const char* TypeName()
{
    if (std::is_same<T, half>::value) return "half";
    if (std::is_same<T, bfloat16_t>::value) return "bfloat16_t";
    if (std::is_same<T, float>::value) return "float";
    if (std::is_same<T, double>::value) return "double";
    if (std::is_same<T, int8_t>::value) return "int8_t";
    if (std::is_same<T, uint8_t>::value) return "uint8_t";
    if (std::is_same<T, int16_t>::value) return "int16_t";
    if (std::is_same<T, uint16_t>::value) return "uint16_t";
    if (std::is_same<T, int32_t>::value) return "int32_t";
    if (std::is_same<T, uint32_t>::value) return "uint32_t";
    if (std::is_same<T, int64_t>::value) return "int64_t";
    if (std::is_same<T, uint64_t>::value) return "uint64_t";
    return "?";
}

// ---------------------------------------------------------------- tensor access
template <typename T>
inline HW TensorHw(const char* api, const char* role, const AscendC::LocalTensor<T>& t)
{
    const HW hw = PosToHw(t.cvtPos_);
    if (hw == HW::MAX || hw == HW::GM) {
        Fail(api, "%s is not an on-chip LocalTensor (position %s); get tensors from TBuf::Get", role, PosName(t.cvtPos_));
    }
    return hw;
}

// Bytes [t.addr + off, + bytes) of t's space on core c.
template <typename T>
inline uint8_t* TensorBytes(
    Core* c, const char* api, const char* role, const AscendC::LocalTensor<T>& t, uint64_t off, uint64_t bytes)
{
    return SpacePtr(c, api, role, TensorHw(api, role, t), t.cvtAddr_ + off, bytes);
}

template <typename T>
inline void NeedHw(const char* api, const char* role, const AscendC::LocalTensor<T>& t, HW want, const char* positions)
{
    const HW hw = TensorHw(api, role, t);
    if (hw != want) {
        Fail(api, "%s must be in %s (%s); it is a %s tensor in %s", role, HwName(want), positions, PosName(t.cvtPos_),
            HwName(hw));
    }
}

// UB operand of a vector instruction: in UB, aligned, [0, elems) inside the UB.
template <typename T>
inline uint8_t* UbOperand(Core* c, const char* api, const char* role, const AscendC::LocalTensor<T>& t, uint64_t elems,
    uint32_t align = 32)
{
    NeedHw(api, role, t, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, role, HW::UB, t.cvtAddr_, align);
    return TensorBytes(c, api, role, t, 0, elems * sizeof(T));
}

inline void CheckOverlap(const char* api, const char* ra, uint64_t a, uint64_t na, const char* rb, uint64_t b,
    uint64_t nb)
{
    if (na == 0 || nb == 0 || a == b) {
        return;
    }
    if (a < b + nb && b < a + na) {
        Fail(api, "%s [%llu, %llu) partially overlaps %s [%llu, %llu); operands must be identical or disjoint", ra,
            static_cast<unsigned long long>(a), static_cast<unsigned long long>(a + na), rb,
            static_cast<unsigned long long>(b), static_cast<unsigned long long>(b + nb));
    }
}

inline void CheckCount(const char* api, int64_t count)
{
    if (count < 0) {
        Fail(api, "count %lld is negative", static_cast<long long>(count));
    }
}

// ---------------------------------------------------------------- repeat (high-dimension) addressing
struct RepOp {
    uint32_t addr;
    uint32_t esz;
    uint32_t blk; // data-block stride, 32-byte units
    uint32_t rep; // repeat stride, 32-byte units
};
inline uint64_t LaneAddr(const RepOp& o, uint32_t r, uint32_t j)
{
    const uint32_t per = 32 / o.esz;
    return o.addr + static_cast<uint64_t>(r) * o.rep * 32 + static_cast<uint64_t>(j / per) * o.blk * 32 +
           static_cast<uint64_t>(j % per) * o.esz;
}
struct Mask {
    bool bits = false;
    uint64_t cnt = 0;
    uint64_t m[2] = {0, 0};
    bool On(uint32_t j) const { return bits ? ((m[j / 64] >> (j % 64)) & 1u) != 0 : j < cnt; }
};
inline Mask CountMask(const char* api, uint64_t mask, uint32_t lanes)
{
    if (mask > lanes) {
        Fail(api, "mask %llu exceeds the %u elements of one repeat (256 bytes)", static_cast<unsigned long long>(mask),
            lanes);
    }
    Mask k;
    k.cnt = mask;
    return k;
}
inline Mask BitMask(const char* api, const uint64_t* mask, uint32_t lanes)
{
    if (mask == nullptr) {
        Fail(api, "mask[] is null");
    }
    Mask k;
    k.bits = true;
    k.m[0] = mask[0];
    k.m[1] = lanes > 64 ? mask[1] : 0;
    return k;
}
inline uint8_t* LanePtr(Core* c, const char* api, const char* role, uint64_t addr, uint32_t esz)
{
    return SpacePtr(c, api, role, HW::UB, addr, esz);
}
template <bool isSetMask>
inline void NeedSetMask(const char* api)
{
    if (!isSetMask) {
        Fail(api, "isSetMask=false needs SetVectorMask, which this subset does not include");
    }
}

// ---------------------------------------------------------------- generic vector engines
template <typename D, typename S, typename F>
inline void CountMap1(const char* api, const AscendC::LocalTensor<D>& dst, const AscendC::LocalTensor<S>& src,
    int64_t count, F f)
{
    Core* c = NeedAiv(api);
    CheckCount(api, count);
    if (count == 0) {
        return;
    }
    uint8_t* d = UbOperand(c, api, "dst", dst, count);
    const uint8_t* s = UbOperand(c, api, "src", src, count);
    if (sizeof(D) == sizeof(S)) {
        CheckOverlap(api, "dst", dst.cvtAddr_, count * sizeof(D), "src", src.cvtAddr_, count * sizeof(S));
    }
    std::vector<S> tmp(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
        tmp[i] = Ld<S>(s + i * sizeof(S));
    }
    for (int64_t i = 0; i < count; ++i) {
        St<D>(d + i * sizeof(D), f(tmp[i]));
    }
}

template <typename T, typename F>
inline void CountMap2(const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src0,
    const AscendC::LocalTensor<T>& src1, int64_t count, F f)
{
    Core* c = NeedAiv(api);
    CheckCount(api, count);
    if (count == 0) {
        return;
    }
    uint8_t* d = UbOperand(c, api, "dst", dst, count);
    const uint8_t* a = UbOperand(c, api, "src0", src0, count);
    const uint8_t* b = UbOperand(c, api, "src1", src1, count);
    const uint64_t n = count * sizeof(T);
    CheckOverlap(api, "dst", dst.cvtAddr_, n, "src0", src0.cvtAddr_, n);
    CheckOverlap(api, "dst", dst.cvtAddr_, n, "src1", src1.cvtAddr_, n);
    std::vector<T> ta(static_cast<size_t>(count)), tb(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
        ta[i] = Ld<T>(a + i * sizeof(T));
        tb[i] = Ld<T>(b + i * sizeof(T));
    }
    for (int64_t i = 0; i < count; ++i) {
        St<T>(d + i * sizeof(T), f(ta[i], tb[i]));
    }
}

// One repeat at a time: read every active lane of the sources, then write the destination lanes.
template <typename T, typename F>
inline void RepMap2(const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src0,
    const AscendC::LocalTensor<T>& src1, const Mask& mk, uint8_t repeat, const AscendC::BinaryRepeatParams& p, F f)
{
    Core* c = NeedAiv(api);
    UbOperand(c, api, "dst", dst, 0);
    UbOperand(c, api, "src0", src0, 0);
    UbOperand(c, api, "src1", src1, 0);
    const uint32_t lanes = 256 / sizeof(T);
    const RepOp od{dst.cvtAddr_, sizeof(T), p.dstBlkStride, p.dstRepStride};
    const RepOp oa{src0.cvtAddr_, sizeof(T), p.src0BlkStride, p.src0RepStride};
    const RepOp ob{src1.cvtAddr_, sizeof(T), p.src1BlkStride, p.src1RepStride};
    if (p.dstBlkStride == 0) {
        Fail(api, "dstBlkStride 0 is undefined on the chip");
    }
    std::vector<T> ra(lanes), rb(lanes);
    for (uint32_t r = 0; r < repeat; ++r) {
        for (uint32_t j = 0; j < lanes; ++j) {
            if (mk.On(j)) {
                ra[j] = Ld<T>(LanePtr(c, api, "src0", LaneAddr(oa, r, j), sizeof(T)));
                rb[j] = Ld<T>(LanePtr(c, api, "src1", LaneAddr(ob, r, j), sizeof(T)));
            }
        }
        for (uint32_t j = 0; j < lanes; ++j) {
            if (mk.On(j)) {
                St<T>(LanePtr(c, api, "dst", LaneAddr(od, r, j), sizeof(T)), f(ra[j], rb[j]));
            }
        }
    }
}

template <typename D, typename S, typename F>
inline void RepMap1(const char* api, const AscendC::LocalTensor<D>& dst, const AscendC::LocalTensor<S>& src,
    const Mask& mk, uint32_t lanes, uint8_t repeat, const AscendC::UnaryRepeatParams& p, F f)
{
    Core* c = NeedAiv(api);
    UbOperand(c, api, "dst", dst, 0);
    UbOperand(c, api, "src", src, 0);
    if (p.dstBlkStride == 0) {
        Fail(api, "dstBlkStride 0 is undefined on the chip");
    }
    const RepOp od{dst.cvtAddr_, sizeof(D), p.dstBlkStride, p.dstRepStride};
    const RepOp os{src.cvtAddr_, sizeof(S), p.srcBlkStride, p.srcRepStride};
    std::vector<S> rs(lanes);
    for (uint32_t r = 0; r < repeat; ++r) {
        for (uint32_t j = 0; j < lanes; ++j) {
            if (mk.On(j)) {
                rs[j] = Ld<S>(LanePtr(c, api, "src", LaneAddr(os, r, j), sizeof(S)));
            }
        }
        for (uint32_t j = 0; j < lanes; ++j) {
            if (mk.On(j)) {
                St<D>(LanePtr(c, api, "dst", LaneAddr(od, r, j), sizeof(D)), f(rs[j]));
            }
        }
    }
}

// ---------------------------------------------------------------- element functions
template <typename T>
struct Ops {
    using N = Num<T>;
    using W = typename N::W;
    static T Add(T a, T b) { return N::Put(N::Get(a) + N::Get(b)); }
    static T Sub(T a, T b) { return N::Put(N::Get(a) - N::Get(b)); }
    static T Mul(T a, T b) { return N::Put(N::Get(a) * N::Get(b)); }
    static T Div(T a, T b) { return DivW(a, b, IsFloatish<T>()); }
    static T DivW(T a, T b, std::true_type) { return N::Put(N::Get(a) / N::Get(b)); }
    static T DivW(T a, T b, std::false_type)
    {
        const W d = N::Get(b);
        return N::Put(d == 0 ? W(0) : N::Get(a) / d);
    }
    static T Max(T a, T b) { return MaxW(a, b, IsFloatish<T>()); }
    static T MaxW(T a, T b, std::true_type) { return N::Put(VecMax(N::Get(a), N::Get(b))); }
    static T MaxW(T a, T b, std::false_type) { return N::Get(a) > N::Get(b) ? a : b; }
    static T Min(T a, T b) { return MinW(a, b, IsFloatish<T>()); }
    static T MinW(T a, T b, std::true_type) { return N::Put(VecMin(N::Get(a), N::Get(b))); }
    static T MinW(T a, T b, std::false_type) { return N::Get(a) < N::Get(b) ? a : b; }
    static T Abs(T a) { return AbsW(a, IsFloatish<T>()); }
    static T AbsW(T a, std::true_type) { return N::Put(std::fabs(N::Get(a))); }
    static T AbsW(T a, std::false_type) { return N::Put(N::Get(a) < 0 ? -N::Get(a) : N::Get(a)); }
    static T Relu(T a) { return ReluW(a, IsFloatish<T>()); }
    static T ReluW(T a, std::true_type) { return N::Put(VecRelu(N::Get(a))); }
    static T ReluW(T a, std::false_type) { return N::Get(a) > 0 ? a : T(0); }
};

// ---------------------------------------------------------------- cast
enum class Dt { I8, U8, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64, OTHER };
template <typename T>
inline Dt DtOf()
{
    if (std::is_same<T, int8_t>::value) return Dt::I8;
    if (std::is_same<T, uint8_t>::value) return Dt::U8;
    if (std::is_same<T, int16_t>::value) return Dt::I16;
    if (std::is_same<T, uint16_t>::value) return Dt::U16;
    if (std::is_same<T, half>::value) return Dt::F16;
    if (std::is_same<T, bfloat16_t>::value) return Dt::BF16;
    if (std::is_same<T, int32_t>::value) return Dt::I32;
    if (std::is_same<T, uint32_t>::value) return Dt::U32;
    if (std::is_same<T, float>::value) return Dt::F32;
    if (std::is_same<T, int64_t>::value) return Dt::I64;
    if (std::is_same<T, uint64_t>::value) return Dt::U64;
    if (std::is_same<T, double>::value) return Dt::F64;
    return Dt::OTHER;
}

inline const char* RoundName(AscendC::RoundMode m)
{
    switch (m) {
        case AscendC::RoundMode::CAST_NONE: return "CAST_NONE";
        case AscendC::RoundMode::CAST_RINT: return "CAST_RINT";
        case AscendC::RoundMode::CAST_FLOOR: return "CAST_FLOOR";
        case AscendC::RoundMode::CAST_CEIL: return "CAST_CEIL";
        case AscendC::RoundMode::CAST_ROUND: return "CAST_ROUND";
        case AscendC::RoundMode::CAST_TRUNC: return "CAST_TRUNC";
        case AscendC::RoundMode::CAST_ODD: return "CAST_ODD";
        default: return "unsupported";
    }
}

// Round modes each (dst, src) pair accepts, from the per-product tables of the Cast reference.
inline bool CastModeOk(Dt t, Dt u, AscendC::RoundMode m)
{
    using R = AscendC::RoundMode;
    const bool a35 = Cfg().arch == 35;
    const bool five = m == R::CAST_RINT || m == R::CAST_FLOOR || m == R::CAST_CEIL || m == R::CAST_ROUND ||
                      m == R::CAST_TRUNC;
    const bool none = m == R::CAST_NONE;
    if (u == Dt::F32 && t == Dt::F16) return five || none || m == R::CAST_ODD;
    if (u == Dt::F32 && (t == Dt::BF16 || t == Dt::I32 || t == Dt::I16 || t == Dt::F32 || t == Dt::I64)) return five;
    if (u == Dt::F16 && t == Dt::F32) return none;
    if (u == Dt::F16 && (t == Dt::I8 || t == Dt::U8)) return five || (!a35 && none);
    if (u == Dt::F16 && (t == Dt::I16 || t == Dt::I32 || t == Dt::BF16)) return five;
    if (u == Dt::BF16 && t == Dt::F32) return none;
    if (u == Dt::BF16 && (t == Dt::I32 || t == Dt::F16)) return five;
    if (u == Dt::I32 && t == Dt::F32) return five || (!a35 && none);
    if (u == Dt::I16 && t == Dt::F16) return five || (!a35 && none);
    if (u == Dt::I64 && t == Dt::F32) return five;
    // lossless or saturating integer conversions and int8/uint8 -> half
    return none;
}

inline Rnd ToRnd(AscendC::RoundMode m)
{
    switch (m) {
        case AscendC::RoundMode::CAST_FLOOR: return Rnd::FLOOR;
        case AscendC::RoundMode::CAST_CEIL: return Rnd::CEIL;
        case AscendC::RoundMode::CAST_ROUND: return Rnd::ROUND;
        case AscendC::RoundMode::CAST_TRUNC: return Rnd::TRUNC;
        case AscendC::RoundMode::CAST_ODD: return Rnd::ODD;
        default: return Rnd::RINT;
    }
}

template <typename U>
inline long double ToLd(const U& v)
{
    return static_cast<long double>(Num<U>::Get(v));
}

template <typename T>
inline T FromLd(long double v, Rnd m, Dt src)
{
    if constexpr (std::is_same<T, half>::value) {
        half h;
        h.val = std::isnan(v) ? static_cast<uint16_t>(0x7E00u) : static_cast<uint16_t>(RoundToBits<5, 10>(v, m));
        return h;
    } else if constexpr (std::is_same<T, bfloat16_t>::value) {
        bfloat16_t b;
        b.val = std::isnan(v) ? static_cast<uint16_t>(0x7FC0u) : static_cast<uint16_t>(RoundToBits<8, 7>(v, m));
        return b;
    } else if constexpr (std::is_same<T, float>::value) {
        return (src == Dt::F32) ? F32RoundIntegral(static_cast<float>(v), m) : LdToF32(v, m);
    } else {
        using L = std::numeric_limits<T>;
        const int64_t i = LdToInt(v, m, static_cast<long double>(L::lowest()), static_cast<long double>(L::max()));
        return static_cast<T>(i);
    }
}

// ---------------------------------------------------------------- reductions
// Sum of one repeat's lanes: pairwise tree over the repeat's lanes in index order (inactive lanes are 0).
inline float TreeSum(std::vector<float>& v)
{
    size_t n = v.size();
    while (n > 1) {
        for (size_t i = 0; i < n / 2; ++i) {
            v[i] = v[2 * i] + v[2 * i + 1];
        }
        n /= 2;
    }
    return v[0];
}

template <typename T>
inline void PutIndex(uint8_t* p, uint32_t idx)
{
    if (sizeof(T) == 2) {
        St<uint16_t>(p, static_cast<uint16_t>(idx));
    } else {
        St<uint32_t>(p, idx);
    }
}

} // namespace cvtile_twin

// ====================================================================== core type / kernel type
inline int32_t cvtile_core_type()
{
    cvtile_twin::Core* c = cvtile_twin::Self("ASCEND_IS_AIC/ASCEND_IS_AIV");
    return c->kind == cvtile_twin::Kind::AIC ? AscendC::AIC : AscendC::AIV;
}
inline void cvtile_kernel_task_type(KernelMetaType value)
{
    cvtile_twin::Self("KERNEL_TASK_TYPE_DEFAULT");
    const KernelMetaType launched = cvtile_twin::CurLaunch()->type;
    if (value != launched) {
        cvtile_twin::Fail("KERNEL_TASK_TYPE_DEFAULT",
            "the kernel declares kernel type %d but CVTILE_TWIN_RUN launched it as kernel type %d",
            static_cast<int>(value), static_cast<int>(launched));
    }
}

namespace AscendC {

// ====================================================================== LocalTensor / GlobalTensor / TBuf / TPipe
template <typename T>
inline LocalTensor<T>::LocalTensor(TPosition pos, uint32_t addr, uint32_t tileSize)
    : cvtPos_(pos), cvtAddr_(addr), cvtLen_(tileSize * static_cast<uint32_t>(sizeof(T)))
{}

template <typename T>
inline T LocalTensor<T>::GetValue(const uint32_t offset) const
{
    using namespace ::cvtile_twin;
    const char* api = "LocalTensor::GetValue";
    Core* c = Self(api);
    NeedHw(api, "tensor", *this, HW::UB, "VECIN/VECOUT/VECCALC; the scalar unit reads UB only");
    return Ld<T>(TensorBytes(c, api, "element", *this, static_cast<uint64_t>(offset) * sizeof(T), sizeof(T)));
}

template <typename T>
template <typename S>
inline void LocalTensor<T>::SetValue(const uint32_t index, const S value) const
{
    using namespace ::cvtile_twin;
    const char* api = "LocalTensor::SetValue";
    Core* c = Self(api);
    NeedHw(api, "tensor", *this, HW::UB, "VECIN/VECOUT/VECCALC; the scalar unit writes UB only");
    St<T>(TensorBytes(c, api, "element", *this, static_cast<uint64_t>(index) * sizeof(T), sizeof(T)),
        static_cast<T>(value));
}

template <typename T>
inline LocalTensor<T> LocalTensor<T>::operator[](const uint32_t offset) const
{
    using namespace ::cvtile_twin;
    const uint64_t off = static_cast<uint64_t>(offset) * sizeof(T);
    if (off > cvtLen_) {
        Fail("LocalTensor::operator[]", "offset %u elements (%llu bytes) is beyond the tensor's %u bytes", offset,
            static_cast<unsigned long long>(off), cvtLen_);
    }
    LocalTensor<T> r = *this;
    r.cvtAddr_ = cvtAddr_ + static_cast<uint32_t>(off);
    r.cvtLen_ = cvtLen_ - static_cast<uint32_t>(off);
    return r;
}

template <typename T>
template <typename U>
inline LocalTensor<U> LocalTensor<T>::ReinterpretCast() const
{
    using namespace ::cvtile_twin;
    LocalTensor<U> r;
    r.cvtPos_ = cvtPos_;
    r.cvtAddr_ = cvtAddr_;
    r.cvtLen_ = cvtLen_;
    return r;
}

template <typename T>
inline T* LocalTensor<T>::GetPhyAddr() const
{
    using namespace ::cvtile_twin;
    return reinterpret_cast<T*>(TensorBytes(Self("LocalTensor::GetPhyAddr"), "LocalTensor::GetPhyAddr", "tensor",
        *this, 0, 0));
}
template <typename T>
inline T* LocalTensor<T>::GetPhyAddr(const uint32_t offset) const
{
    using namespace ::cvtile_twin;
    return reinterpret_cast<T*>(TensorBytes(Self("LocalTensor::GetPhyAddr"), "LocalTensor::GetPhyAddr", "tensor",
        *this, static_cast<uint64_t>(offset) * sizeof(T), 0));
}

template <typename T>
inline void GlobalTensor<T>::SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize)
{
    using namespace ::cvtile_twin;
    cvtPtr_ = buffer;
    bufferSize_ = bufferSize;
    cvtRoot_ = reinterpret_cast<const uint8_t*>(buffer);
    cvtRootBytes_ = bufferSize * sizeof(T);
}
template <typename T>
inline void GlobalTensor<T>::SetGlobalBuffer(__gm__ T* buffer)
{
    using namespace ::cvtile_twin;
    cvtPtr_ = buffer;
    bufferSize_ = 0;
    cvtRoot_ = reinterpret_cast<const uint8_t*>(buffer);
    cvtRootBytes_ = 0;
}
template <typename T>
inline T GlobalTensor<T>::GetValue(const uint64_t offset) const
{
    using namespace ::cvtile_twin;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(cvtPtr_ + offset);
    GmCheck("GlobalTensor::GetValue", "element", cvtRoot_, cvtRootBytes_, p, sizeof(T));
    return Ld<T>(p);
}
template <typename T>
inline void GlobalTensor<T>::SetValue(const uint64_t offset, T value)
{
    using namespace ::cvtile_twin;
    uint8_t* p = reinterpret_cast<uint8_t*>(cvtPtr_ + offset);
    GmCheck("GlobalTensor::SetValue", "element", cvtRoot_, cvtRootBytes_, p, sizeof(T));
    St<T>(p, value);
}
template <typename T>
inline GlobalTensor<T> GlobalTensor<T>::operator[](const uint64_t offset) const
{
    using namespace ::cvtile_twin;
    GlobalTensor<T> r = *this;
    r.cvtPtr_ = cvtPtr_ + offset;
    r.bufferSize_ = bufferSize_ > offset ? bufferSize_ - offset : 0;
    return r;
}

template <TPosition pos>
template <typename T>
inline LocalTensor<T> TBuf<pos>::Get()
{
    using namespace ::cvtile_twin;
    if (!cvtInit_) {
        Fail("TBuf::Get", "the TBuf was not initialised with TPipe::InitBuffer");
    }
    LocalTensor<T> r;
    r.cvtPos_ = pos;
    r.cvtAddr_ = cvtAddr_;
    r.cvtLen_ = cvtLen_;
    return r;
}
template <TPosition pos>
template <typename T>
inline LocalTensor<T> TBuf<pos>::Get(uint32_t len)
{
    using namespace ::cvtile_twin;
    LocalTensor<T> r = Get<T>();
    if (static_cast<uint64_t>(len) * sizeof(T) > cvtLen_) {
        Fail("TBuf::Get", "len %u elements (%llu bytes) exceeds the buffer's %u bytes", len,
            static_cast<unsigned long long>(len) * sizeof(T), cvtLen_);
    }
    r.cvtLen_ = len * static_cast<uint32_t>(sizeof(T));
    return r;
}
template <TPosition pos>
template <typename T>
inline LocalTensor<T> TBuf<pos>::GetWithOffset(uint32_t size, uint32_t bufOffset)
{
    using namespace ::cvtile_twin;
    LocalTensor<T> r = Get<T>();
    if (bufOffset % 32 != 0) {
        Fail("TBuf::GetWithOffset", "bufOffset %u is not 32-byte aligned", bufOffset);
    }
    if (static_cast<uint64_t>(size) * sizeof(T) + bufOffset > cvtLen_) {
        Fail("TBuf::GetWithOffset", "size %u elements at byte offset %u exceeds the buffer's %u bytes", size,
            bufOffset, cvtLen_);
    }
    r.cvtAddr_ += bufOffset;
    r.cvtLen_ = size * static_cast<uint32_t>(sizeof(T));
    return r;
}

inline void TPipe::Init() {}
inline void TPipe::Reset()
{
    using namespace ::cvtile_twin;
    for (auto& n : cvtNext_) {
        n = 0;
    }
}
inline void TPipe::Destroy() {}
template <TPosition pos>
inline bool TPipe::InitBuffer(TBuf<pos>& buf, uint32_t len)
{
    using namespace ::cvtile_twin;
    const char* api = "TPipe::InitBuffer";
    Self(api);
    const HW hw = PosToHw(pos);
    if (hw == HW::MAX || hw == HW::GM) {
        Fail(api, "TBuf position %s has no on-chip memory", PosName(pos));
    }
    const uint64_t alen = (static_cast<uint64_t>(len) + 31) / 32 * 32;
    const uint64_t at = cvtNext_[HwIdx(hw)];
    const uint64_t cap = Cfg().cap[HwIdx(hw)];
    if (at + alen > cap) {
        Fail(api, "a %s buffer of %u bytes (%llu after 32-byte rounding) at byte %llu exceeds the %s capacity of %llu "
                  "bytes",
            PosName(pos), len, static_cast<unsigned long long>(alen), static_cast<unsigned long long>(at), HwName(hw),
            static_cast<unsigned long long>(cap));
    }
    buf.cvtAddr_ = static_cast<uint32_t>(at);
    buf.cvtLen_ = static_cast<uint32_t>(alen);
    buf.cvtInit_ = true;
    cvtNext_[HwIdx(hw)] = static_cast<uint32_t>(at + alen);
    return true;
}

// ====================================================================== system variables
inline int64_t GetBlockNum()
{
    using namespace ::cvtile_twin;
    Self("GetBlockNum");
    return CurLaunch()->blockDim;
}
inline int64_t GetBlockIdx() { return ::cvtile_twin::Self("GetBlockIdx")->blockIdx; }
inline int64_t GetSubBlockIdx()
{
    using namespace ::cvtile_twin;
    Core* c = Self("GetSubBlockIdx");
    return c->kind == Kind::AIV ? c->sub : 0;
}
inline int64_t GetSubBlockNum()
{
    using namespace ::cvtile_twin;
    Core* c = Self("GetSubBlockNum");
    return c->kind == Kind::AIV ? CurLaunch()->aivPerGroup : 1;
}
inline int64_t GetTaskRatio()
{
    using namespace ::cvtile_twin;
    Core* c = Self("GetTaskRatio");
    return c->kind == Kind::AIV ? CurLaunch()->aivPerGroup : 1;
}
inline int64_t GetTaskRation() { return GetTaskRatio(); }

// ====================================================================== synchronisation
template <HardEvent event>
inline void SetFlag(int32_t eventID)
{
    using namespace ::cvtile_twin;
    char api[80];
    std::snprintf(api, sizeof(api), "SetFlag<HardEvent::%s>(%d)", EventName(event), eventID);
    Core* c = Self(api);
    if (eventID < 0 || eventID > 7) {
        Fail(api, "eventID %d is outside 0..7", eventID);
    }
    if (!EventUsable(c, event, api)) {
        return;
    }
    bool& f = c->evt[static_cast<int>(event)][eventID];
    if (f) {
        Fail(api, "the event is already set and not waited; a second SetFlag on the same event and id is undefined "
                  "on the chip");
    }
    f = true;
}
template <HardEvent event>
inline void WaitFlag(int32_t eventID)
{
    using namespace ::cvtile_twin;
    char api[80];
    std::snprintf(api, sizeof(api), "WaitFlag<HardEvent::%s>(%d)", EventName(event), eventID);
    Core* c = Self(api);
    if (eventID < 0 || eventID > 7) {
        Fail(api, "eventID %d is outside 0..7", eventID);
    }
    if (!EventUsable(c, event, api)) {
        return;
    }
    bool& f = c->evt[static_cast<int>(event)][eventID];
    if (!f) {
        Fail(api, "no earlier SetFlag<HardEvent::%s>(%d) on this core is pending; on the chip this wait never ends",
            EventName(event), eventID);
    }
    f = false;
}
template <pipe_t pipe>
inline void PipeBarrier()
{
    using namespace ::cvtile_twin;
    Core* c = Self("PipeBarrier");
    if (pipe == PIPE_S) {
        Fail("PipeBarrier<PIPE_S>", "PIPE_S is not supported (the scalar pipe is ordered by hardware)");
    }
    if (!CoreHasPipe(c->kind, pipe) && Cfg().arch == 22) {
        Fail("PipeBarrier", "the %s has no %s", c->kind == Kind::AIC ? "AIC" : "AIV", PipeName(pipe));
    }
}
template <uint8_t modeId, pipe_t pipe>
inline void CrossCoreSetFlag(uint16_t flagId)
{
    using namespace ::cvtile_twin;
    char api[80];
    std::snprintf(api, sizeof(api), "CrossCoreSetFlag<%d, %s>(%u)", modeId, PipeName(pipe), flagId);
    CrossSet(modeId, pipe, flagId, api);
}
template <uint8_t modeId, pipe_t pipe>
inline void CrossCoreWaitFlag(uint16_t flagId)
{
    using namespace ::cvtile_twin;
    char api[80];
    std::snprintf(api, sizeof(api), "CrossCoreWaitFlag<%d, %s>(%u)", modeId, PipeName(pipe), flagId);
    CrossWait(modeId, pipe, flagId, api);
}

// ====================================================================== data movement
namespace cvtile_copy {
using namespace ::cvtile_twin;
// Which core may copy between a GM tensor and an on-chip space.
inline Core* GmLocalCore(const char* api, HW hw)
{
    using namespace ::cvtile_twin;
    Core* c = Self(api);
    if (hw == HW::UB && c->kind != Kind::AIV) {
        Fail(api, "GM <-> UB copies run on a vector core (AIV)");
    }
    if (hw == HW::L1 && c->kind != Kind::AIC) {
        Fail(api, "GM <-> L1 copies run on the cube core (AIC)");
    }
    if (hw != HW::UB && hw != HW::L1) {
        Fail(api, "DataCopy between GM and %s is not a data path (use LoadData / Fixpipe)", HwName(hw));
    }
    return c;
}
inline uint64_t ContigBytes(const char* api, uint64_t count, uint32_t esz)
{
    using namespace ::cvtile_twin;
    uint64_t bytes = count * esz;
    if (bytes % 32 != 0) {
        char m[200];
        std::snprintf(m, sizeof(m),
            "count %llu x %u bytes = %llu bytes is not a multiple of 32; the chip moves only the first %llu bytes "
            "(use DataCopyPad for tails)",
            static_cast<unsigned long long>(count), esz, static_cast<unsigned long long>(bytes),
            static_cast<unsigned long long>(bytes / 32 * 32));
        Strict(api, m);
        bytes = bytes / 32 * 32;
    }
    return bytes;
}
} // namespace cvtile_copy

template <typename T>
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "DataCopy(GM->local, count)";
    const HW hw = TensorHw(api, "dst", dst);
    Core* c = cvtile_copy::GmLocalCore(api, hw);
    CheckAlign(api, "dst", hw, dst.cvtAddr_, 32);
    const uint64_t bytes = cvtile_copy::ContigBytes(api, count, sizeof(T));
    uint8_t* d = TensorBytes(c, api, "dst", dst, 0, bytes);
    const uint8_t* s = reinterpret_cast<const uint8_t*>(src.cvtPtr_);
    GmCheck(api, "src", src.cvtRoot_, src.cvtRootBytes_, s, bytes);
    std::memcpy(d, s, bytes);
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "DataCopy(local->GM, count)";
    const HW hw = TensorHw(api, "src", src);
    Core* c = cvtile_copy::GmLocalCore(api, hw);
    CheckAlign(api, "src", hw, src.cvtAddr_, 32);
    const uint64_t bytes = cvtile_copy::ContigBytes(api, count, sizeof(T));
    const uint8_t* s = TensorBytes(c, api, "src", src, 0, bytes);
    uint8_t* d = reinterpret_cast<uint8_t*>(dst.cvtPtr_);
    GmCheck(api, "dst", dst.cvtRoot_, dst.cvtRootBytes_, d, bytes);
    std::memcpy(d, s, bytes);
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "DataCopy(UB->UB, count)";
    Core* c = NeedAiv(api);
    NeedHw(api, "dst", dst, HW::UB, "VECIN/VECOUT/VECCALC");
    NeedHw(api, "src", src, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, "dst", HW::UB, dst.cvtAddr_, 32);
    CheckAlign(api, "src", HW::UB, src.cvtAddr_, 32);
    const uint64_t bytes = cvtile_copy::ContigBytes(api, count, sizeof(T));
    uint8_t* d = TensorBytes(c, api, "dst", dst, 0, bytes);
    const uint8_t* s = TensorBytes(c, api, "src", src, 0, bytes);
    std::memmove(d, s, bytes);
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& repeatParams)
{
    using namespace ::cvtile_twin;
    const char* api = "DataCopy(GM->local, DataCopyParams)";
    const HW hw = TensorHw(api, "dst", dst);
    Core* c = cvtile_copy::GmLocalCore(api, hw);
    CheckAlign(api, "dst", hw, dst.cvtAddr_, 32);
    const uint64_t len = repeatParams.blockLen * 32ull;
    for (uint32_t i = 0; i < repeatParams.blockCount; ++i) {
        const uint64_t so = i * (len + repeatParams.srcStride * 32ull);
        const uint64_t dO = i * (len + repeatParams.dstStride * 32ull);
        const uint8_t* s = reinterpret_cast<const uint8_t*>(src.cvtPtr_) + so;
        GmCheck(api, "src", src.cvtRoot_, src.cvtRootBytes_, s, len);
        std::memcpy(TensorBytes(c, api, "dst", dst, dO, len), s, len);
    }
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams)
{
    using namespace ::cvtile_twin;
    const char* api = "DataCopy(local->GM, DataCopyParams)";
    const HW hw = TensorHw(api, "src", src);
    Core* c = cvtile_copy::GmLocalCore(api, hw);
    CheckAlign(api, "src", hw, src.cvtAddr_, 32);
    const uint64_t len = repeatParams.blockLen * 32ull;
    for (uint32_t i = 0; i < repeatParams.blockCount; ++i) {
        const uint64_t so = i * (len + repeatParams.srcStride * 32ull);
        const uint64_t dO = i * (len + repeatParams.dstStride * 32ull);
        uint8_t* d = reinterpret_cast<uint8_t*>(dst.cvtPtr_) + dO;
        GmCheck(api, "dst", dst.cvtRoot_, dst.cvtRootBytes_, d, len);
        std::memcpy(d, TensorBytes(c, api, "src", src, so, len), len);
    }
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams)
{
    using namespace ::cvtile_twin;
    const char* api = "DataCopy(UB->UB, DataCopyParams)";
    Core* c = NeedAiv(api);
    NeedHw(api, "dst", dst, HW::UB, "VECIN/VECOUT/VECCALC");
    NeedHw(api, "src", src, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, "dst", HW::UB, dst.cvtAddr_, 32);
    CheckAlign(api, "src", HW::UB, src.cvtAddr_, 32);
    const uint64_t len = repeatParams.blockLen * 32ull;
    for (uint32_t i = 0; i < repeatParams.blockCount; ++i) {
        const uint64_t so = i * (len + repeatParams.srcStride * 32ull);
        const uint64_t dO = i * (len + repeatParams.dstStride * 32ull);
        std::memmove(TensorBytes(c, api, "dst", dst, dO, len), TensorBytes(c, api, "src", src, so, len), len);
    }
}

namespace cvtile_copy {
using namespace ::cvtile_twin;
template <typename T>
inline void Nd2Nz(const char* api, const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint64_t ndNum,
    uint64_t nValue, uint64_t dValue, uint64_t srcNdMatrixStride, uint64_t srcDValue, uint64_t dstNzC0Stride,
    uint64_t dstNzNStride, uint64_t dstNzMatrixStride)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAic(api);
    NeedHw(api, "dst", dst, HW::L1, "A1/B1/C1");
    CheckAlign(api, "dst", HW::L1, dst.cvtAddr_, 32);
    if (ndNum == 0 || nValue == 0 || dValue == 0) {
        return;
    }
    if (ndNum > 4095 || nValue > 16384 || dValue > 65535 || srcDValue < 1 || srcDValue > 65535 || dstNzC0Stride < 1 ||
        dstNzC0Stride > 16384 || dstNzNStride < 1 || dstNzNStride > 16384 || dstNzMatrixStride > 16384 ||
        srcNdMatrixStride > 65535) {
        Fail(api, "Nd2NzParams out of range: ndNum %llu (0..4095), nValue %llu (0..16384), dValue %llu (0..65535), "
                  "srcDValue %llu (1..65535), dstNzC0Stride %llu (1..16384), dstNzNStride %llu (1..16384), "
                  "dstNzMatrixStride %llu (0..16384), srcNdMatrixStride %llu (0..65535)",
            (unsigned long long)ndNum, (unsigned long long)nValue, (unsigned long long)dValue,
            (unsigned long long)srcDValue, (unsigned long long)dstNzC0Stride, (unsigned long long)dstNzNStride,
            (unsigned long long)dstNzMatrixStride, (unsigned long long)srcNdMatrixStride);
    }
    if (dValue > srcDValue) {
        Fail(api, "dValue %llu exceeds srcDValue %llu (the source row length)", (unsigned long long)dValue,
            (unsigned long long)srcDValue);
    }
    const uint64_t c0 = 32 / sizeof(T);
    const uint64_t dPad = (dValue + c0 - 1) / c0 * c0;
    const uint8_t* sBase = reinterpret_cast<const uint8_t*>(src.cvtPtr_);
    for (uint64_t i = 0; i < ndNum; ++i) {
        for (uint64_t r = 0; r < nValue; ++r) {
            const uint8_t* srow = sBase + (i * srcNdMatrixStride + r * srcDValue) * sizeof(T);
            GmCheck(api, "src", src.cvtRoot_, src.cvtRootBytes_, srow, dValue * sizeof(T));
            for (uint64_t col = 0; col < dPad; ++col) {
                const uint64_t el = i * dstNzMatrixStride + (col / c0) * dstNzC0Stride * c0 + r * dstNzNStride * c0 +
                                    (col % c0);
                uint8_t* d = TensorBytes(c, api, "dst", dst, el * sizeof(T), sizeof(T));
                if (col < dValue) {
                    std::memcpy(d, srow + col * sizeof(T), sizeof(T));
                } else {
                    std::memset(d, 0, sizeof(T));
                }
            }
        }
    }
}
} // namespace cvtile_copy

#if CVTILE_ARCH35
template <typename T, bool enableSmallC0>
inline CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& intriParams)
{
    using namespace ::cvtile_twin;
    if (enableSmallC0) {
        Fail("DataCopy(GM->L1, Nd2NzParams)", "enableSmallC0 = true is not modelled by the twin");
    }
#else
template <typename T>
inline CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& intriParams)
{
    using namespace ::cvtile_twin;
#endif
    const Nd2NzParams& p = intriParams;
    cvtile_copy::Nd2Nz("DataCopy(GM->L1, Nd2NzParams)", dst, src, p.ndNum, p.nValue, p.dValue, p.srcNdMatrixStride,
        p.srcDValue, p.dstNzC0Stride, p.dstNzNStride, p.dstNzMatrixStride);
}

namespace cvtile_copy {
using namespace ::cvtile_twin;
template <typename T>
inline void PadIn(const char* api, bool compact, const LocalTensor<T>& dst, const GlobalTensor<T>& src,
    uint64_t blockCount, uint64_t blockLen, int64_t srcStride, int64_t dstStride, bool isPad, uint64_t left,
    uint64_t right, const T& padValue)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAiv(api);
    NeedHw(api, "dst", dst, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, "dst", HW::UB, dst.cvtAddr_, 32);
    if (blockCount == 0 || blockLen == 0) {
        return;
    }
    if (blockCount > 4095 || blockLen > 2097151) {
        Fail(api, "blockCount %llu (0..4095) or blockLen %llu bytes (0..2097151) out of range",
            (unsigned long long)blockCount, (unsigned long long)blockLen);
    }
    if (blockLen % sizeof(T) != 0) {
        Fail(api, "blockLen %llu bytes is not a multiple of sizeof(%s) = %zu", (unsigned long long)blockLen,
            TypeName<T>(), sizeof(T));
    }
    if (left * sizeof(T) > 32 || right * sizeof(T) > 32) {
        Fail(api, "leftPadding %llu / rightPadding %llu elements exceed 32 bytes", (unsigned long long)left,
            (unsigned long long)right);
    }
    if (srcStride < -static_cast<int64_t>(blockLen)) {
        Fail(api, "srcStride %lld is below -blockLen", (long long)srcStride);
    }
    const uint8_t* sBase = reinterpret_cast<const uint8_t*>(src.cvtPtr_);
    std::vector<uint8_t> garbage(32, 0xFF);
    auto fill = [&](uint8_t* d, uint64_t bytes, bool usePad, const uint8_t* firstElem) {
        for (uint64_t b = 0; b < bytes; b += sizeof(T)) {
            if (firstElem) {
                std::memcpy(d + b, firstElem, sizeof(T));
            } else if (usePad) {
                St<T>(d + b, padValue);
            } else {
                std::memset(d + b, 0xFF, sizeof(T));
            }
        }
    };
    if (compact) {
        uint64_t off = 0;
        for (uint64_t i = 0; i < blockCount; ++i) {
            const uint8_t* s = sBase + static_cast<int64_t>(i) * (static_cast<int64_t>(blockLen) + srcStride);
            GmCheck(api, "src", src.cvtRoot_, src.cvtRootBytes_, s, blockLen);
            std::memcpy(TensorBytes(c, api, "dst", dst, off, blockLen), s, blockLen);
            off += blockLen;
        }
        const uint64_t end = (off + 31) / 32 * 32;
        fill(TensorBytes(c, api, "dst", dst, off, end - off), end - off, isPad, nullptr);
        return;
    }
    const uint64_t rowData = left * sizeof(T) + blockLen + right * sizeof(T);
    const uint64_t rowBytes = (rowData + 31) / 32 * 32;
    for (uint64_t i = 0; i < blockCount; ++i) {
        const uint8_t* s = sBase + static_cast<int64_t>(i) * (static_cast<int64_t>(blockLen) + srcStride);
        GmCheck(api, "src", src.cvtRoot_, src.cvtRootBytes_, s, blockLen);
        const uint64_t rowAt = i * (rowBytes + static_cast<uint64_t>(dstStride) * 32);
        uint8_t* d = TensorBytes(c, api, "dst", dst, rowAt, rowBytes);
        fill(d, left * sizeof(T), isPad, nullptr);
        std::memcpy(d + left * sizeof(T), s, blockLen);
        fill(d + left * sizeof(T) + blockLen, right * sizeof(T), isPad, nullptr);
        const bool noPads = left == 0 && right == 0;
        fill(d + rowData, rowBytes - rowData, isPad, noPads ? s : nullptr);
    }
}

template <typename T>
inline void PadOut(const char* api, bool compact, const GlobalTensor<T>& dst, const LocalTensor<T>& src,
    uint64_t blockCount, uint64_t blockLen, int64_t srcStride, int64_t dstStride)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAiv(api);
    NeedHw(api, "src", src, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, "src", HW::UB, src.cvtAddr_, 32);
    if (blockCount == 0 || blockLen == 0) {
        return;
    }
    if (blockCount > 4095 || blockLen > 2097151) {
        Fail(api, "blockCount %llu (0..4095) or blockLen %llu bytes (0..2097151) out of range",
            (unsigned long long)blockCount, (unsigned long long)blockLen);
    }
    if (blockLen % sizeof(T) != 0) {
        Fail(api, "blockLen %llu bytes is not a multiple of sizeof(%s) = %zu", (unsigned long long)blockLen,
            TypeName<T>(), sizeof(T));
    }
    const uint64_t rowBytes = (blockLen + 31) / 32 * 32;
    uint8_t* dBase = reinterpret_cast<uint8_t*>(dst.cvtPtr_);
    for (uint64_t i = 0; i < blockCount; ++i) {
        const uint64_t so = compact ? i * blockLen : i * (rowBytes + static_cast<uint64_t>(srcStride) * 32);
        uint8_t* d = dBase + static_cast<int64_t>(i) * (static_cast<int64_t>(blockLen) + dstStride);
        GmCheck(api, "dst", dst.cvtRoot_, dst.cvtRootBytes_, d, blockLen);
        std::memcpy(d, TensorBytes(c, api, "src", src, so, blockLen), blockLen);
    }
}
} // namespace cvtile_copy

#if CVTILE_ARCH35
#define CVTILE_PAD_TMPL template <typename T, PaddingMode mode>
#define CVTILE_PAD_COMPACT (mode == PaddingMode::Compact)
#else
#define CVTILE_PAD_TMPL template <typename T>
#define CVTILE_PAD_COMPACT false
#endif
CVTILE_PAD_TMPL
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value) DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src,
    const DataCopyExtParams& dataCopyParams, const DataCopyPadExtParams<T>& padParams)
{
    using namespace ::cvtile_twin;
    const DataCopyExtParams& p = dataCopyParams;
    cvtile_copy::PadIn("DataCopyPad(GM->UB)", CVTILE_PAD_COMPACT, dst, src, p.blockCount, p.blockLen,
        static_cast<int64_t>(p.srcStride), static_cast<int64_t>(p.dstStride), padParams.isPad, padParams.leftPadding,
        padParams.rightPadding, padParams.paddingValue);
}
CVTILE_PAD_TMPL
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& dataCopyParams)
{
    using namespace ::cvtile_twin;
    const DataCopyExtParams& p = dataCopyParams;
    cvtile_copy::PadOut("DataCopyPad(UB->GM)", CVTILE_PAD_COMPACT, dst, src, p.blockCount, p.blockLen,
        static_cast<int64_t>(p.srcStride), static_cast<int64_t>(p.dstStride));
}
CVTILE_PAD_TMPL
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value) DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src,
    const DataCopyParams& dataCopyParams, const DataCopyPadParams& padParams)
{
    using namespace ::cvtile_twin;
    const DataCopyParams& p = dataCopyParams;
    T pv;
    std::memset(&pv, 0, sizeof(T));
    std::memcpy(&pv, &padParams.paddingValue, std::min(sizeof(T), sizeof(uint64_t)));
    cvtile_copy::PadIn("DataCopyPad(GM->UB)", CVTILE_PAD_COMPACT, dst, src, p.blockCount, p.blockLen,
        static_cast<int64_t>(p.srcStride), static_cast<int64_t>(p.dstStride), padParams.isPad, padParams.leftPadding,
        padParams.rightPadding, pv);
}
CVTILE_PAD_TMPL
inline CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& dataCopyParams)
{
    using namespace ::cvtile_twin;
    const DataCopyParams& p = dataCopyParams;
    cvtile_copy::PadOut("DataCopyPad(UB->GM)", CVTILE_PAD_COMPACT, dst, src, p.blockCount, p.blockLen,
        static_cast<int64_t>(p.srcStride), static_cast<int64_t>(p.dstStride));
}
#undef CVTILE_PAD_TMPL
#undef CVTILE_PAD_COMPACT

// ====================================================================== cube: LoadData
namespace cvtile_cube {
using namespace ::cvtile_twin;
inline void LoadFractals(const char* api, Core* c, uint8_t* dstBase, HW dstHw, uint32_t dstAddr,
    const uint8_t* (*srcAt)(const void*, uint64_t), const void* srcCtx, const LoadData2DParams& p, size_t esz)
{
    using namespace ::cvtile_twin;
    if (p.ifTranspose && esz != 2) {
        Fail(api, "ifTranspose needs a 16-bit data type (got %zu-byte elements)", esz);
    }
    const bool a35 = Cfg().arch == 35;
    for (uint32_t i = 0; i < p.repeatTimes; ++i) {
        const int64_t idx = static_cast<int64_t>(p.startIndex) +
                            (p.addrMode == 0 ? 1 : -1) * static_cast<int64_t>(p.srcStride) * static_cast<int64_t>(i);
        if (idx < 0) {
            Fail(api, "repeat %u reads fractal %lld, before the source tensor", i, static_cast<long long>(idx));
        }
        const uint8_t* s = srcAt(srcCtx, static_cast<uint64_t>(idx) * 512);
        const uint64_t dOff = a35 ? i * 512ull : i * (p.dstGap + 1ull) * 512;
        uint8_t* d = SpacePtr(c, api, "dst", dstHw, dstAddr + dOff, 512);
        (void)dstBase;
        if (!p.ifTranspose) {
            std::memcpy(d, s, 512);
        } else {
            for (int r = 0; r < 16; ++r) {
                for (int q = 0; q < 16; ++q) {
                    std::memcpy(d + (r * 16 + q) * 2, s + (q * 16 + r) * 2, 2);
                }
            }
        }
    }
}
template <typename T>
inline HW LoadDst(const char* api, const LocalTensor<T>& dst)
{
    using namespace ::cvtile_twin;
    const HW hw = TensorHw(api, "dst", dst);
    if (hw != HW::L0A && hw != HW::L0B) {
        Fail(api, "dst must be in L0A (A2) or L0B (B2); it is in %s", HwName(hw));
    }
    CheckAlign(api, "dst", hw, dst.cvtAddr_, 512);
    return hw;
}
struct LocalSrcCtx {
    Core* c;
    const char* api;
    HW hw;
    uint32_t addr;
};
inline const uint8_t* LocalSrcAt(const void* ctx, uint64_t off)
{
    using namespace ::cvtile_twin;
    const LocalSrcCtx* x = static_cast<const LocalSrcCtx*>(ctx);
    return SpacePtr(x->c, x->api, "src", x->hw, x->addr + off, 512);
}
struct GmSrcCtx {
    const char* api;
    const uint8_t* root;
    uint64_t rootBytes;
    const uint8_t* base;
};
inline const uint8_t* GmSrcAt(const void* ctx, uint64_t off)
{
    using namespace ::cvtile_twin;
    const GmSrcCtx* x = static_cast<const GmSrcCtx*>(ctx);
    GmCheck(x->api, "src", x->root, x->rootBytes, x->base + off, 512);
    return x->base + off;
}
} // namespace cvtile_cube

template <typename T>
inline CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& loadDataParams)
{
    using namespace ::cvtile_twin;
    const char* api = "LoadData(L1->L0, LoadData2DParams)";
    Core* c = NeedAic(api);
    const HW dh = cvtile_cube::LoadDst(api, dst);
    NeedHw(api, "src", src, HW::L1, "A1/B1");
    CheckAlign(api, "src", HW::L1, src.cvtAddr_, 32);
    cvtile_cube::LocalSrcCtx ctx{c, api, HW::L1, src.cvtAddr_};
    cvtile_cube::LoadFractals(api, c, nullptr, dh, dst.cvtAddr_, &cvtile_cube::LocalSrcAt, &ctx, loadDataParams,
        sizeof(T));
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsLoadT<T>::value) LoadDataWithTranspose(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, const LoadData2dTransposeParams& loadDataParams)
{
    // The LoadDataWithTranspose page: 8-bit and 32-bit types here. Each repeat i reads the two consecutive
    // fractals of src at square startIndex + i * srcStride (squares of 1024 bytes) and writes the two halves of
    // their transposed square: the first at dst + i * (1 + dstGap) fractals (512 B), the second 1 + dstFracGap
    // fractals after the first. 8-bit: two 16 x 32 fractals one above the other make a 32 x 32 square, and its
    // transpose's rows 0-15 and 16-31 are the halves. 32-bit: two 16 x 8 fractals side by side make a 16 x 16
    // square (columns 0-7 from the first), and its transpose's columns 0-7 and 8-15 are the halves (16 x 8
    // each): so src must hold a square's two fractals consecutively (Zz in L1, not Nz).
    using namespace ::cvtile_twin;
    const char* api = "LoadDataWithTranspose(L1->L0, LoadData2dTransposeParams)";
    Core* c = NeedAic(api);
    const LoadData2dTransposeParams& p = loadDataParams;
    if (sizeof(T) != 1 && sizeof(T) != 4) {
        Fail(api, "the twin models the 8-bit and 32-bit forms only (got %zu-byte elements)", sizeof(T));
    }
    if (p.addrMode != 0) {
        Fail(api, "addrMode %u is not modelled (0 only)", static_cast<unsigned>(p.addrMode));
    }
    const HW dh = cvtile_cube::LoadDst(api, dst);
    NeedHw(api, "src", src, HW::L1, "A1/B1");
    CheckAlign(api, "src", HW::L1, src.cvtAddr_, 32);
    for (uint32_t i = 0; i < p.repeatTimes; ++i) {
        const uint64_t sq = (static_cast<uint64_t>(p.startIndex) + static_cast<uint64_t>(i) * p.srcStride) * 1024;
        const uint8_t* s = SpacePtr(c, api, "src", HW::L1, src.cvtAddr_ + static_cast<uint32_t>(sq), 1024);
        const uint64_t first = static_cast<uint64_t>(i) * (1ull + p.dstGap) * 512;
        const uint64_t second = first + (1ull + p.dstFracGap) * 512;
        uint8_t* d0 = SpacePtr(c, api, "dst", dh, dst.cvtAddr_ + static_cast<uint32_t>(first), 512);
        uint8_t* d1 = SpacePtr(c, api, "dst", dh, dst.cvtAddr_ + static_cast<uint32_t>(second), 512);
        uint8_t square[1024];
        std::memcpy(square, s, 1024);
        if (sizeof(T) == 1) {
            for (int r = 0; r < 32; ++r) {
                for (int q = 0; q < 32; ++q) {
                    (r < 16 ? d0 : d1)[(r % 16) * 32 + q] = square[q * 32 + r];
                }
            }
            continue;
        }
        // 32-bit: element (r, q) of the 16 x 16 square is element (r, q % 8) of fractal q / 8; the transpose's
        // element (q, r) lands in half r / 8 at row q, column r % 8
        for (int r = 0; r < 16; ++r) {
            for (int q = 0; q < 16; ++q) {
                std::memcpy((r < 8 ? d0 : d1) + (q * 8 + r % 8) * 4, square + ((q / 8) * 128 + r * 8 + q % 8) * 4, 4);
            }
        }
    }
}
#if !CVTILE_ARCH35
template <typename T>
inline CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    LoadData(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const LoadData2DParams& loadDataParams)
{
    using namespace ::cvtile_twin;
    const char* api = "LoadData(GM->L0, LoadData2DParams)";
    Core* c = NeedAic(api);
    const HW dh = cvtile_cube::LoadDst(api, dst);
    if (loadDataParams.ifTranspose) {
        Fail(api, "ifTranspose is only available on the L1 -> L0A/L0B path");
    }
    cvtile_cube::GmSrcCtx ctx{api, src.cvtRoot_, src.cvtRootBytes_, reinterpret_cast<const uint8_t*>(src.cvtPtr_)};
    cvtile_cube::LoadFractals(api, c, nullptr, dh, dst.cvtAddr_, &cvtile_cube::GmSrcAt, &ctx, loadDataParams,
        sizeof(T));
}
#endif

// ====================================================================== cube: Mmad
template <typename T, typename U, typename S>
inline CVT_ENABLE(cvtile_api::MmadOk<T, U, S>::value) Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm,
    const LocalTensor<S>& filter, const MmadParams& mmadParams)
{
    using namespace ::cvtile_twin;
    const char* api = "Mmad";
    Core* c = NeedAic(api);
    NeedHw(api, "dst", dst, HW::L0C, "CO1");
    NeedHw(api, "fm", fm, HW::L0A, "A2");
    NeedHw(api, "filter", filter, HW::L0B, "B2");
    CheckAlign(api, "dst", HW::L0C, dst.cvtAddr_, 1024);
    CheckAlign(api, "fm", HW::L0A, fm.cvtAddr_, 512);
    CheckAlign(api, "filter", HW::L0B, filter.cvtAddr_, 512);
    const MmadParams& p = mmadParams;
    if (p.m > 4095 || p.n > 4095 || p.k > 4095) {
        Fail(api, "m %u, n %u, k %u: each must be in 0..4095", p.m, p.n, p.k);
    }
    if (p.cmatrixSource) {
        Fail(api, "cmatrixSource = true (C from the bias table) is not modelled by the twin");
    }
    if (p.m == 0 || p.n == 0 || p.k == 0) {
        return;
    }
    const bool a35 = Cfg().arch == 35;
    const uint32_t k0 = 32 / sizeof(U);
    uint32_t kAl = (p.k + k0 - 1) / k0 * k0;
    if (std::is_same<U, float>::value && p.kDirectionAlign) {
        kAl = (p.k + 15u) / 16u * 16u;
    }
    const uint32_t k1 = kAl / k0;
    const uint32_t m1 = (p.m + 15u) / 16u;
    const uint32_t n1 = (p.n + 15u) / 16u;
    bool gemv = p.m == 1;
#if CVTILE_ARCH35
    gemv = gemv && !p.disableGemv;
#endif
    const uint8_t* A = TensorBytes(c, api, "fm", fm, 0, gemv ? kAl * sizeof(U) : m1 * k1 * 512ull);
    const uint8_t* B = TensorBytes(c, api, "filter", filter, 0, static_cast<uint64_t>(k1) * n1 * 512ull);
    uint8_t* C = TensorBytes(c, api, "dst", dst, 0, static_cast<uint64_t>(m1) * n1 * 1024ull);
    const bool init = p.cmatrixInitVal && !p.isBias;
    using AccW = typename std::conditional<std::is_same<T, int32_t>::value, int64_t, float>::type;
    auto aAt = [&](uint32_t mm, uint32_t kk) -> uint64_t {
        if (gemv) {
            return kk;
        }
        if (a35) { // Nz: fractals column-major over (k1, m1), rows inside
            return (static_cast<uint64_t>(kk / k0) * m1 + mm / 16) * (16 * k0) + (mm % 16) * k0 + kk % k0;
        }
        // Zz: fractals row-major over (m1, k1), rows inside
        return (static_cast<uint64_t>(mm / 16) * k1 + kk / k0) * (16 * k0) + (mm % 16) * k0 + kk % k0;
    };
    auto bAt = [&](uint32_t kk, uint32_t nn) -> uint64_t { // Zn: fractals row-major over (k1, n1), columns inside
        return (static_cast<uint64_t>(kk / k0) * n1 + nn / 16) * (16 * k0) + (nn % 16) * k0 + kk % k0;
    };
    const uint32_t rows = gemv ? 1 : m1 * 16;
    std::vector<AccW> bcol(p.k);
    for (uint32_t nn = 0; nn < n1 * 16; ++nn) {
        for (uint32_t kk = 0; kk < p.k; ++kk) {
            bcol[kk] = static_cast<AccW>(Num<S>::Get(Ld<S>(B + bAt(kk, nn) * sizeof(S))));
        }
        for (uint32_t mm = 0; mm < rows; ++mm) {
            uint8_t* cp = C + ((static_cast<uint64_t>(nn / 16) * m1 + mm / 16) * 256 + (mm % 16) * 16 + nn % 16) * 4;
            AccW acc = init ? AccW(0) : static_cast<AccW>(Ld<T>(cp));
            for (uint32_t kk = 0; kk < p.k; ++kk) {
                const AccW a = static_cast<AccW>(Num<U>::Get(Ld<U>(A + aAt(mm, kk) * sizeof(U))));
                const AccW prod = a * bcol[kk];
                acc = acc + prod;
            }
            if (std::is_same<T, int32_t>::value) {
                St<int32_t>(cp, static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(acc))));
            } else {
                St<float>(cp, static_cast<float>(acc));
            }
        }
    }
}

// ====================================================================== cube: Fixpipe
namespace cvtile_fix {
using namespace ::cvtile_twin;
template <typename T, typename U>
inline void CheckQuant(const char* api, QuantMode_t q)
{
    using namespace ::cvtile_twin;
    const bool f32 = std::is_same<U, float>::value;
    if (f32 && std::is_same<T, float>::value && q == NoQuant) return;
    if (f32 && std::is_same<T, half>::value && q == F322F16) return;
    if (f32 && std::is_same<T, bfloat16_t>::value && q == F322BF16) return;
    if (!f32 && std::is_same<T, int32_t>::value && q == NoQuant) return;
    if (!f32 && std::is_same<T, half>::value && q == DEQF16) return;
    Fail(api, "quantPre %d with L0C %s and destination %s is not modelled (float->float/int32->int32 need NoQuant, "
              "float->half F322F16, float->bfloat16_t F322BF16, int32->half DEQF16)",
        static_cast<int>(q), TypeName<U>(), TypeName<T>());
}
// The scalar dequant of DEQF16: the fixpipe keeps the high 19 bits of deqScalar's fp32 (sign, exponent, 10
// mantissa bits), multiplies the int32 converted to fp32 by it in fp32 and rounds to half (nearest even).
struct Dequant {
    bool on = false;
    float scale = 0.0f;
};
inline Dequant DequantOf(QuantMode_t q, uint64_t deqScalar)
{
    Dequant d;
    if (q == DEQF16) {
        const uint32_t bits = static_cast<uint32_t>(deqScalar & 0xFFFFFFFFull) & 0xFFFFE000u;
        d.on = true;
        std::memcpy(&d.scale, &bits, 4);
    }
    return d;
}
template <typename T, typename U>
inline T Convert(U v, bool relu, const Dequant& deq)
{
    using namespace ::cvtile_twin;
    if (std::is_same<U, int32_t>::value && deq.on) {
        int32_t x;
        std::memcpy(&x, &v, 4);
        float f = static_cast<float>(x) * deq.scale;
        if (relu) f = VecRelu(f);
        return T(f);
    }
    if (std::is_same<U, int32_t>::value) {
        int32_t x;
        std::memcpy(&x, &v, 4);
        if (relu && x < 0) x = 0;
        T out;
        std::memcpy(&out, &x, sizeof(T));
        return out;
    }
    float f;
    std::memcpy(&f, &v, 4);
    if (relu) f = VecRelu(f);
    return T(f);
}

// Geometry of one Fixpipe call in elements; see README "Fixpipe".
struct Geo {
    int layout; // 0 NZ, 1 ND (row major), 2 DN (column major)
    uint32_t nSize, mSize, srcStride, dstStride;
    uint32_t ndNum;
    uint64_t srcNdStrideElems, dstNdStrideElems;
    uint32_t srcNzC0Stride; // DN only: row step in 16-element units
    uint64_t nzDstColBlockElems;
    Dequant deq; // quantPre DEQF16 (set from the parameter block by the Fixpipe entry points)
};

// Copy L0C -> destination through `put(elemIndex, value)`; rows [m0, m1) and cols [n0, n1) selected.
template <typename T, typename U, typename Put>
inline void Walk(const char* api, Core* c, const LocalTensor<U>& src, const Geo& g, bool relu, uint32_t rowLo,
    uint32_t rowHi, uint32_t colLo, uint32_t colHi, Put put)
{
    using namespace ::cvtile_twin;
    for (uint32_t nd = 0; nd < g.ndNum; ++nd) {
        for (uint32_t j = rowLo; j < rowHi; ++j) {
            for (uint32_t col = colLo; col < colHi; ++col) {
                const uint64_t rowStep = g.layout == 2 ? static_cast<uint64_t>(g.srcNzC0Stride) * 16 : 16;
                const uint64_t se = nd * g.srcNdStrideElems + static_cast<uint64_t>(col / 16) * g.srcStride * 16 +
                                    j * rowStep + col % 16;
                const U v = Ld<U>(TensorBytes(c, api, "src", src, se * sizeof(U), sizeof(U)));
                const uint32_t jj = j - rowLo;
                const uint32_t cc = col - colLo;
                uint64_t de;
                if (g.layout == 1) {
                    de = nd * g.dstNdStrideElems + static_cast<uint64_t>(jj) * g.dstStride + cc;
                } else if (g.layout == 2) {
                    de = nd * g.dstNdStrideElems + static_cast<uint64_t>(cc) * g.dstStride + jj;
                } else {
                    de = static_cast<uint64_t>(cc / 16) * g.nzDstColBlockElems + static_cast<uint64_t>(jj) * 16 +
                         cc % 16;
                }
                put(de, Convert<T, U>(v, relu, g.deq));
            }
        }
    }
}

template <typename U>
inline void CheckSrc(const char* api, const LocalTensor<U>& src)
{
    using namespace ::cvtile_twin;
    NeedHw(api, "src", src, HW::L0C, "CO1");
    CheckAlign(api, "src", HW::L0C, src.cvtAddr_, 64);
}

inline void CheckSizes(const char* api, const Geo& g)
{
    using namespace ::cvtile_twin;
    if (g.nSize > 4095) {
        Fail(api, "nSize %u is outside 0..4095", g.nSize);
    }
    if (g.layout == 0 && g.nSize % 16 != 0) {
        Fail(api, "nSize %u must be a multiple of 16 for NZ output", g.nSize);
    }
    if (g.layout == 1 && g.mSize > 8192) {
        Fail(api, "mSize %u is outside 0..8192 with NZ2ND", g.mSize);
    }
    if (g.layout != 0 && g.dstStride == 0) {
        Fail(api, "dstStride (elements per destination row) must not be 0");
    }
    if (g.layout == 0 && g.nzDstColBlockElems == 0) {
        Fail(api, "dstStride must not be 0 for NZ output");
    }
}

template <typename T, typename U>
inline void ToGm(const char* api, Core* c, const GlobalTensor<T>& dst, const LocalTensor<U>& src, const Geo& g,
    bool relu)
{
    using namespace ::cvtile_twin;
    CheckSizes(api, g);
    if (g.nSize == 0 || g.mSize == 0 || g.ndNum == 0) {
        return;
    }
    uint8_t* base = reinterpret_cast<uint8_t*>(dst.cvtPtr_);
    Walk<T, U>(api, c, src, g, relu, 0, g.mSize, 0, g.nSize, [&](uint64_t de, T v) {
        uint8_t* p = base + de * sizeof(T);
        GmCheck(api, "dst", dst.cvtRoot_, dst.cvtRootBytes_, p, sizeof(T));
        St<T>(p, v);
    });
}

template <typename T, typename U>
inline void ToLocal(const char* api, Core* c, Core* target, const LocalTensor<T>& dst, const LocalTensor<U>& src,
    const Geo& g, bool relu, uint32_t rowLo, uint32_t rowHi, uint32_t colLo, uint32_t colHi)
{
    using namespace ::cvtile_twin;
    Walk<T, U>(api, c, src, g, relu, rowLo, rowHi, colLo, colHi,
        [&](uint64_t de, T v) { St<T>(TensorBytes(target, api, "dst", dst, de * sizeof(T), sizeof(T)), v); });
}

inline int LayoutOf(CO2Layout f) { return f == CO2Layout::NZ ? 0 : (f == CO2Layout::ROW_MAJOR ? 1 : 2); }
} // namespace cvtile_fix

// V220 parameter block: dstStride in 32-byte blocks for NZ, elements per row for ND; srcNdStride in 256-element
// (16 x C0_Size) units; dstNdStride in elements.
template <typename T, typename U, const FixpipeConfig& config>
inline CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value)
    Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams)
{
    using namespace ::cvtile_twin;
    const char* api = "Fixpipe(L0C->GM, FixpipeParamsV220)";
    Core* c = NeedAic(api);
    cvtile_fix::CheckSrc(api, src);
    const FixpipeParamsV220& p = intriParams;
    cvtile_fix::CheckQuant<T, U>(api, p.quantPre);
    cvtile_fix::Geo g{};
    g.deq = cvtile_fix::DequantOf(p.quantPre, p.deqScalar);
    g.layout = cvtile_fix::LayoutOf(config.format);
    if (g.layout == 2 && Cfg().arch != 35) {
        Fail(api, "CFG_COLUMN_MAJOR (NZ2DN) exists on Ascend 950 only");
    }
    if (g.layout == 2) {
        Fail(api, "CFG_COLUMN_MAJOR needs FixpipeParamsArch3510<CO2Layout::COLUMN_MAJOR>");
    }
    g.nSize = p.nSize;
    g.mSize = p.mSize;
    g.srcStride = p.srcStride;
    g.dstStride = p.dstStride;
    g.ndNum = g.layout == 1 ? p.ndNum : 1;
    g.srcNdStrideElems = static_cast<uint64_t>(p.srcNdStride) * 256;
    g.dstNdStrideElems = p.dstNdStride;
    g.nzDstColBlockElems = static_cast<uint64_t>(p.dstStride) * 32 / sizeof(T);
    if (p.isChannelSplit) {
        Fail(api, "isChannelSplit is not modelled by the twin");
    }
    cvtile_fix::ToGm<T, U>(api, c, dst, src, g, p.reluEn);
}
template <typename T, typename U, const FixpipeConfig& config>
inline CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value)
    Fixpipe(const LocalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams)
{
    using namespace ::cvtile_twin;
    const char* api = "Fixpipe(L0C->L1, FixpipeParamsV220)";
    Core* c = NeedAic(api);
    cvtile_fix::CheckSrc(api, src);
    NeedHw(api, "dst", dst, HW::L1, "A1/B1/C1 (the V220 block writes L1; L0C -> UB needs FixpipeParamsArch3510)");
    CheckAlign(api, "dst", HW::L1, dst.cvtAddr_, 32);
    const FixpipeParamsV220& p = intriParams;
    cvtile_fix::CheckQuant<T, U>(api, p.quantPre);
    cvtile_fix::Geo g{};
    g.deq = cvtile_fix::DequantOf(p.quantPre, p.deqScalar);
    g.layout = cvtile_fix::LayoutOf(config.format);
    if (g.layout == 2) {
        Fail(api, "CFG_COLUMN_MAJOR is not available with FixpipeParamsV220");
    }
    g.nSize = p.nSize;
    g.mSize = p.mSize;
    g.srcStride = p.srcStride;
    g.dstStride = p.dstStride;
    g.ndNum = g.layout == 1 ? p.ndNum : 1;
    g.srcNdStrideElems = static_cast<uint64_t>(p.srcNdStride) * 256;
    g.dstNdStrideElems = p.dstNdStride;
    g.nzDstColBlockElems = static_cast<uint64_t>(p.dstStride) * 32 / sizeof(T);
    cvtile_fix::CheckSizes(api, g);
    if (g.nSize == 0 || g.mSize == 0 || g.ndNum == 0) {
        return;
    }
    cvtile_fix::ToLocal<T, U>(api, c, c, dst, src, g, p.reluEn, 0, g.mSize, 0, g.nSize);
}

#if CVTILE_ARCH35
namespace cvtile_fix {
using namespace ::cvtile_twin;
template <CO2Layout F>
inline void Transform(Geo& g, const FixpipeParamsArch3510<F>& p);
template <>
inline void Transform<CO2Layout::NZ>(Geo& g, const FixpipeParamsArch3510<CO2Layout::NZ>& p)
{
    using namespace ::cvtile_twin;
    g.ndNum = 1;
    g.nzDstColBlockElems = p.dstStride;
}
template <>
inline void Transform<CO2Layout::ROW_MAJOR>(Geo& g, const FixpipeParamsArch3510<CO2Layout::ROW_MAJOR>& p)
{
    using namespace ::cvtile_twin;
    g.ndNum = p.params.ndNum;
    g.srcNdStrideElems = static_cast<uint64_t>(p.params.srcNdStride) * 16;
    g.dstNdStrideElems = p.params.dstNdStride;
}
template <>
inline void Transform<CO2Layout::COLUMN_MAJOR>(Geo& g, const FixpipeParamsArch3510<CO2Layout::COLUMN_MAJOR>& p)
{
    using namespace ::cvtile_twin;
    g.ndNum = p.params.dnNum;
    g.srcNdStrideElems = static_cast<uint64_t>(p.params.srcNzMatrixStride) * 16;
    g.dstNdStrideElems = p.params.dstDnMatrixStride;
    g.srcNzC0Stride = p.params.srcNzC0Stride;
    if (g.srcNzC0Stride == 0) {
        Fail("Fixpipe", "Nz2DnParams.srcNzC0Stride must not be 0");
    }
}
template <CO2Layout F>
inline Geo Geo3510(const FixpipeParamsArch3510<F>& p)
{
    using namespace ::cvtile_twin;
    Geo g{};
    g.layout = LayoutOf(F);
    g.nSize = p.nSize;
    g.mSize = p.mSize;
    g.srcStride = p.srcStride;
    g.dstStride = p.dstStride;
    g.srcNzC0Stride = 1;
    Transform<F>(g, p);
    return g;
}
} // namespace cvtile_fix

// Arch3510 parameter block: dstStride in elements (NZ) or elements per row (ND/DN); Nz2NdParams.srcNdStride
// in 16-element (C0_Size) units; dstNdStride in elements.
template <typename T, typename U, const FixpipeConfig& config>
inline CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value) Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src,
    const FixpipeParamsArch3510<config.format>& intriParams)
{
    using namespace ::cvtile_twin;
    const char* api = "Fixpipe(L0C->GM, FixpipeParamsArch3510)";
    Core* c = NeedAic(api);
    cvtile_fix::CheckSrc(api, src);
    if (config.isToUB) {
        Fail(api, "the FixpipeConfig has isToUB = true but the destination is a GlobalTensor");
    }
    const auto& p = intriParams;
    cvtile_fix::CheckQuant<T, U>(api, p.quantPre);
    if (p.dualDstCtl != 0) {
        Fail(api, "dualDstCtl applies to L0C -> UB only");
    }
    if (p.isChannelSplit) {
        Fail(api, "isChannelSplit is not modelled by the twin");
    }
    cvtile_fix::Geo g = cvtile_fix::Geo3510<config.format>(p);
    g.deq = cvtile_fix::DequantOf(p.quantPre, p.deqScalar);
    cvtile_fix::ToGm<T, U>(api, c, dst, src, g, p.reluEn);
}
template <typename T, typename U, const FixpipeConfig& config>
inline CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value) Fixpipe(const LocalTensor<T>& dst, const LocalTensor<U>& src,
    const FixpipeParamsArch3510<config.format>& intriParams)
{
    using namespace ::cvtile_twin;
    const char* api = "Fixpipe(L0C->UB/L1, FixpipeParamsArch3510)";
    Core* c = NeedAic(api);
    cvtile_fix::CheckSrc(api, src);
    const auto& p = intriParams;
    cvtile_fix::CheckQuant<T, U>(api, p.quantPre);
    cvtile_fix::Geo g = cvtile_fix::Geo3510<config.format>(p);
    g.deq = cvtile_fix::DequantOf(p.quantPre, p.deqScalar);
    cvtile_fix::CheckSizes(api, g);
    const HW dh = TensorHw(api, "dst", dst);
    if (g.nSize == 0 || g.mSize == 0 || g.ndNum == 0) {
        return;
    }
    if (dh == HW::L1) {
        if (config.isToUB) {
            Fail(api, "the FixpipeConfig has isToUB = true but dst is an L1 tensor");
        }
        CheckAlign(api, "dst", HW::L1, dst.cvtAddr_, 32);
        cvtile_fix::ToLocal<T, U>(api, c, c, dst, src, g, p.reluEn, 0, g.mSize, 0, g.nSize);
        return;
    }
    if (dh != HW::UB) {
        Fail(api, "dst must be in UB (VECIN/VECOUT/VECCALC) or L1; it is in %s", HwName(dh));
    }
    if (!config.isToUB) {
        Fail(api, "a UB destination needs a FixpipeConfig with isToUB = true (e.g. {CO2Layout::ROW_MAJOR, true})");
    }
    CheckAlign(api, "dst", HW::UB, dst.cvtAddr_, 32);
    if (g.layout == 1 && (g.nSize * sizeof(T)) % 32 != 0) {
        Fail(api, "with NZ2ND to UB, nSize * sizeof(%s) = %zu must be a multiple of 32 bytes", TypeName<T>(),
            g.nSize * sizeof(T));
    }
    Launch& L = *CurLaunch();
    if (L.type != KERNEL_TYPE_MIX_AIC_1_2 && L.type != KERNEL_TYPE_MIX_AIC_1_1) {
        Fail(api, "L0C -> UB needs a MIX kernel (the UB belongs to the group's vector cores)");
    }
    auto& aivs = L.aiv[c->group];
    if (p.dualDstCtl == 0) {
        const int sb = p.subBlockId ? 1 : 0;
        if (sb >= static_cast<int>(aivs.size())) {
            Fail(api, "subBlockId %d has no vector core in this kernel type", sb);
        }
        cvtile_fix::ToLocal<T, U>(api, c, aivs[sb], dst, src, g, p.reluEn, 0, g.mSize, 0, g.nSize);
    } else if (p.dualDstCtl == 1 || p.dualDstCtl == 2) {
        if (aivs.size() != 2) {
            Fail(api, "dualDstCtl %u needs KERNEL_TYPE_MIX_AIC_1_2", p.dualDstCtl);
        }
        if (p.quantPre != NoQuant && p.quantPre != F322F16 && p.quantPre != F322BF16) {
            Fail(api, "dualDstCtl does not combine with quantisation");
        }
        if (p.dualDstCtl == 1) {
            if (g.mSize % 2 != 0) {
                Fail(api, "dualDstCtl 1 (split M) needs an even mSize, got %u", g.mSize);
            }
            const uint32_t h = g.mSize / 2;
            cvtile_fix::ToLocal<T, U>(api, c, aivs[0], dst, src, g, p.reluEn, 0, h, 0, g.nSize);
            cvtile_fix::ToLocal<T, U>(api, c, aivs[1], dst, src, g, p.reluEn, h, g.mSize, 0, g.nSize);
        } else {
            if (g.layout == 0 ? (g.nSize % 32 != 0) : (g.nSize % 2 != 0)) {
                Fail(api, "dualDstCtl 2 (split N) needs nSize a multiple of %d, got %u", g.layout == 0 ? 32 : 2,
                    g.nSize);
            }
            const uint32_t h = g.nSize / 2;
            cvtile_fix::ToLocal<T, U>(api, c, aivs[0], dst, src, g, p.reluEn, 0, g.mSize, 0, h);
            cvtile_fix::ToLocal<T, U>(api, c, aivs[1], dst, src, g, p.reluEn, 0, g.mSize, h, g.nSize);
        }
    } else {
        Fail(api, "dualDstCtl %u is reserved", p.dualDstCtl);
    }
}
#endif

// ====================================================================== vector: unary
#if CVTILE_ARCH35
#define CVTILE_UNARY_CFG(NAME, CFGT, FN)                                                                             \
    template <typename T, const CFGT& config>                                                                        \
    inline CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)                                                              \
        NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count)                             \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        CountMap1(#NAME, dst, src, count, [](T a) { return T(FN(static_cast<float>(a))); });                         \
    }
CVTILE_UNARY_CFG(Exp, ExpConfig, VecExp)
CVTILE_UNARY_CFG(Ln, LnConfig, VecLn)
CVTILE_UNARY_CFG(Sqrt, SqrtConfig, VecSqrt)
CVTILE_UNARY_CFG(Rsqrt, RsqrtConfig, VecRsqrt)
CVTILE_UNARY_CFG(Reciprocal, ReciprocalConfig, VecRec)
#undef CVTILE_UNARY_CFG
#else
#define CVTILE_UNARY(NAME, FN)                                                                                       \
    template <typename T>                                                                                            \
    inline CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)                                                              \
        NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count)                             \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        CountMap1(#NAME, dst, src, count, [](T a) { return T(FN(static_cast<float>(a))); });                         \
    }
CVTILE_UNARY(Exp, VecExp)
CVTILE_UNARY(Ln, VecLn)
CVTILE_UNARY(Sqrt, VecSqrt)
CVTILE_UNARY(Rsqrt, VecRsqrt)
CVTILE_UNARY(Reciprocal, VecRec)
#undef CVTILE_UNARY
#endif
template <typename T>
inline CVT_ENABLE(cvtile_api::IsVecAbs<T>::value)
    Abs(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count)
{
    using namespace ::cvtile_twin;
    CountMap1("Abs", dst, src, count, [](T a) { return Ops<T>::Abs(a); });
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsRelu<T>::value)
    Relu(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count)
{
    using namespace ::cvtile_twin;
    CountMap1("Relu", dst, src, count, [](T a) { return Ops<T>::Relu(a); });
}

// ====================================================================== vector: math library (count forms)
#define CVTILE_MATH1(NAME, FN)                                                                                       \
    template <typename T, bool isReuseSource>                                                                        \
    inline CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)                                                              \
        NAME(const LocalTensor<T>& dstTensor, const LocalTensor<T>& srcTensor, const uint32_t calCount)              \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        CountMap1(#NAME, dstTensor, srcTensor, calCount, [](T a) { return T(FN(static_cast<float>(a))); });          \
    }
CVTILE_MATH1(Tanh, VecTanh)
CVTILE_MATH1(Erf, VecErf)
CVTILE_MATH1(Floor, VecFloor)
CVTILE_MATH1(Sigmoid, VecSigmoid)
#undef CVTILE_MATH1
template <typename T, bool isReuseSource>
inline CVT_ENABLE(cvtile_api::IsVecFloat<T>::value) Power(const LocalTensor<T>& dstTensor,
    const LocalTensor<T>& src0Tensor, const LocalTensor<T>& src1Tensor, uint32_t calCount)
{
    using namespace ::cvtile_twin;
    CountMap2("Power", dstTensor, src0Tensor, src1Tensor, calCount,
        [](T a, T b) { return T(VecPow(static_cast<float>(a), static_cast<float>(b))); });
}
template <typename T, bool isReuseSource>
inline CVT_ENABLE(cvtile_api::IsVecFloat<T>::value) Power(const LocalTensor<T>& dstTensor,
    const LocalTensor<T>& src0Tensor, const T& src1Scalar, uint32_t calCount)
{
    using namespace ::cvtile_twin;
    const float y = static_cast<float>(src1Scalar);
    CountMap1("Power", dstTensor, src0Tensor, calCount, [y](T a) { return T(VecPow(static_cast<float>(a), y)); });
}
template <typename T, bool isReuseSource>
inline CVT_ENABLE(cvtile_api::IsVecFloat<T>::value) Power(const LocalTensor<T>& dstTensor,
    const T& src0Scalar, const LocalTensor<T>& src1Tensor, uint32_t calCount)
{
    using namespace ::cvtile_twin;
    const float x = static_cast<float>(src0Scalar);
    CountMap1("Power", dstTensor, src1Tensor, calCount, [x](T b) { return T(VecPow(x, static_cast<float>(b))); });
}

// ====================================================================== vector: binary
#define CVTILE_BINARY_OPS(NAME, CNT, REP, OPS)                                                                       \
    template <typename T>                                                                                            \
    inline CVT_ENABLE(cvtile_api::CNT<T>::value) NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0,      \
        const LocalTensor<T>& src1, const int32_t& count)                                                           \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        CountMap2(#NAME, dst, src0, src1, count, [](T a, T b) { return OPS::NAME(a, b); });                       \
    }                                                                                                                \
    template <typename T, bool isSetMask>                                                                            \
    inline CVT_ENABLE(cvtile_api::REP<T>::value) NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0,      \
        const LocalTensor<T>& src1, uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams) \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        NeedSetMask<isSetMask>(#NAME);                                                                               \
        RepMap2(#NAME, dst, src0, src1, CountMask(#NAME, mask, 256 / sizeof(T)), repeatTime, repeatParams,           \
            [](T a, T b) { return OPS::NAME(a, b); });                                                            \
    }                                                                                                                \
    template <typename T, bool isSetMask>                                                                            \
    inline CVT_ENABLE(cvtile_api::REP<T>::value) NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0,      \
        const LocalTensor<T>& src1, uint64_t mask[], const uint8_t repeatTime,                                       \
        const BinaryRepeatParams& repeatParams)                                                                      \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        NeedSetMask<isSetMask>(#NAME);                                                                               \
        RepMap2(#NAME, dst, src0, src1, BitMask(#NAME, mask, 256 / sizeof(T)), repeatTime, repeatParams,             \
            [](T a, T b) { return OPS::NAME(a, b); });                                                            \
    }
#define CVTILE_BINARY(NAME, TRAIT) CVTILE_BINARY_OPS(NAME, TRAIT, TRAIT, Ops<T>)
CVTILE_BINARY(Add, IsVecArith)
CVTILE_BINARY(Sub, IsVecArith)
CVTILE_BINARY(Mul, IsVecMul)
CVTILE_BINARY(Max, IsVecArith)
CVTILE_BINARY(Min, IsVecArith)
#undef CVTILE_BINARY
#if CVTILE_ARCH35
template <typename T, const DivConfig& config>
inline CVT_ENABLE(cvtile_api::IsVecDiv<T>::value)
    Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    using namespace ::cvtile_twin;
    CountMap2("Div", dst, src0, src1, count, [](T a, T b) { return Ops<T>::Div(a, b); });
}
template <typename T, bool isSetMask, const DivConfig& config>
inline CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0,
    const LocalTensor<T>& src1, uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Div");
    RepMap2("Div", dst, src0, src1, CountMask("Div", mask, 256 / sizeof(T)), repeatTime, repeatParams,
        [](T a, T b) { return Ops<T>::Div(a, b); });
}
template <typename T, bool isSetMask, const DivConfig& config>
inline CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0,
    const LocalTensor<T>& src1, uint64_t mask[], const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Div");
    RepMap2("Div", dst, src0, src1, BitMask("Div", mask, 256 / sizeof(T)), repeatTime, repeatParams,
        [](T a, T b) { return Ops<T>::Div(a, b); });
}
#else
template <typename T>
inline CVT_ENABLE(cvtile_api::IsVecDiv<T>::value)
    Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    using namespace ::cvtile_twin;
    CountMap2("Div", dst, src0, src1, count, [](T a, T b) { return Ops<T>::Div(a, b); });
}
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0,
    const LocalTensor<T>& src1, uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Div");
    RepMap2("Div", dst, src0, src1, CountMask("Div", mask, 256 / sizeof(T)), repeatTime, repeatParams,
        [](T a, T b) { return Ops<T>::Div(a, b); });
}
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst, const LocalTensor<T>& src0,
    const LocalTensor<T>& src1, uint64_t mask[], const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Div");
    RepMap2("Div", dst, src0, src1, BitMask("Div", mask, 256 / sizeof(T)), repeatTime, repeatParams,
        [](T a, T b) { return Ops<T>::Div(a, b); });
}
#endif

// ====================================================================== vector: bitwise
namespace cvtile_vec {
template <size_t N>
struct UBits;
template <>
struct UBits<1> {
    using type = uint8_t;
};
template <>
struct UBits<2> {
    using type = uint16_t;
};
template <>
struct UBits<4> {
    using type = uint32_t;
};
template <>
struct UBits<8> {
    using type = uint64_t;
};
// Bitwise operations on the element's bit pattern (half / float for Not on arch35 included).
template <typename T>
struct BitOps {
    using U = typename UBits<sizeof(T)>::type;
    static U B(const T& v)
    {
        U u;
        std::memcpy(&u, &v, sizeof(T));
        return u;
    }
    static T V(U u)
    {
        T v;
        std::memcpy(&v, &u, sizeof(T));
        return v;
    }
    static T And(T a, T b) { return V(static_cast<U>(B(a) & B(b))); }
    static T Or(T a, T b) { return V(static_cast<U>(B(a) | B(b))); }
    static T Not(T a) { return V(static_cast<U>(~B(a))); }
};
} // namespace cvtile_vec
#define CVTILE_BITWISE(NAME) CVTILE_BINARY_OPS(NAME, IsBitCnt, IsBitRep, cvtile_vec::BitOps<T>)
CVTILE_BITWISE(And)
CVTILE_BITWISE(Or)
#undef CVTILE_BITWISE
#undef CVTILE_BINARY_OPS
template <typename T>
inline CVT_ENABLE(cvtile_api::IsNotCnt<T>::value)
    Not(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count)
{
    using namespace ::cvtile_twin;
    CountMap1("Not", dst, src, count, [](T a) { return cvtile_vec::BitOps<T>::Not(a); });
}
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsNotRep<T>::value) Not(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    uint64_t mask[], const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Not");
    RepMap1("Not", dst, src, BitMask("Not", mask, 256 / sizeof(T)), 256 / sizeof(T), repeatTime, repeatParams,
        [](T a) { return cvtile_vec::BitOps<T>::Not(a); });
}
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsNotRep<T>::value) Not(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    uint64_t mask, const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Not");
    RepMap1("Not", dst, src, CountMask("Not", mask, 256 / sizeof(T)), 256 / sizeof(T), repeatTime, repeatParams,
        [](T a) { return cvtile_vec::BitOps<T>::Not(a); });
}

// ====================================================================== vector: tensor-scalar
#define CVTILE_SCALAR(NAME, OP)                                                                                      \
    template <typename T, bool isSetMask>                                                                            \
    inline CVT_ENABLE(cvtile_api::IsVecScalar<T>::value)                                                             \
        NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count)       \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        NeedSetMask<isSetMask>(#NAME);                                                                               \
        const T s = scalarValue;                                                                                     \
        CountMap1(#NAME, dst, src, count, [s](T a) { return Ops<T>::OP(a, s); });                                    \
    }                                                                                                                \
    template <typename T, bool isSetMask>                                                                            \
    inline CVT_ENABLE(cvtile_api::IsVecScalar<T>::value) NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, \
        const T& scalarValue, uint64_t mask, const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)        \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        NeedSetMask<isSetMask>(#NAME);                                                                               \
        const T s = scalarValue;                                                                                     \
        RepMap1(#NAME, dst, src, CountMask(#NAME, mask, 256 / sizeof(T)), 256 / sizeof(T), repeatTime,              \
            repeatParams, [s](T a) { return Ops<T>::OP(a, s); });                                                    \
    }                                                                                                                \
    template <typename T, bool isSetMask>                                                                            \
    inline CVT_ENABLE(cvtile_api::IsVecScalar<T>::value) NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, \
        const T& scalarValue, uint64_t mask[], const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)      \
    {                                                                                                                \
        using namespace ::cvtile_twin;                                                                               \
        NeedSetMask<isSetMask>(#NAME);                                                                               \
        const T s = scalarValue;                                                                                     \
        RepMap1(#NAME, dst, src, BitMask(#NAME, mask, 256 / sizeof(T)), 256 / sizeof(T), repeatTime, repeatParams,  \
            [s](T a) { return Ops<T>::OP(a, s); });                                                                  \
    }
CVTILE_SCALAR(Adds, Add)
CVTILE_SCALAR(Muls, Mul)
CVTILE_SCALAR(Maxs, Max)
CVTILE_SCALAR(Mins, Min)
#undef CVTILE_SCALAR

template <typename T>
inline CVT_ENABLE(cvtile_api::IsDup<T>::value)
    Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count)
{
    using namespace ::cvtile_twin;
    const char* api = "Duplicate";
    Core* c = NeedAiv(api);
    CheckCount(api, count);
    if (count == 0) {
        return;
    }
    uint8_t* d = UbOperand(c, api, "dst", dst, count);
    for (int32_t i = 0; i < count; ++i) {
        St<T>(d + i * sizeof(T), scalarValue);
    }
}
namespace cvtile_vec {
using namespace ::cvtile_twin;
template <typename T>
inline void DupRep(const char* api, const LocalTensor<T>& dst, const T& v, const Mask& mk, uint8_t repeat,
    uint16_t blk, uint8_t rep)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAiv(api);
    UbOperand(c, api, "dst", dst, 0);
    if (blk == 0) {
        Fail(api, "dstBlockStride 0 is undefined on the chip");
    }
    const RepOp od{dst.cvtAddr_, sizeof(T), blk, rep};
    for (uint32_t r = 0; r < repeat; ++r) {
        for (uint32_t j = 0; j < 256 / sizeof(T); ++j) {
            if (mk.On(j)) {
                St<T>(LanePtr(c, api, "dst", LaneAddr(od, r, j), sizeof(T)), v);
            }
        }
    }
}
} // namespace cvtile_vec
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsDup<T>::value) Duplicate(const LocalTensor<T>& dst, const T& scalarValue,
    uint64_t mask, const uint8_t repeatTime, const uint16_t dstBlockStride, const uint8_t dstRepeatStride)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Duplicate");
    cvtile_vec::DupRep("Duplicate", dst, scalarValue, CountMask("Duplicate", mask, 256 / sizeof(T)), repeatTime,
        dstBlockStride, dstRepeatStride);
}
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsDup<T>::value) Duplicate(const LocalTensor<T>& dst, const T& scalarValue,
    uint64_t mask[], const uint8_t repeatTime, const uint16_t dstBlockStride, const uint8_t dstRepeatStride)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("Duplicate");
    cvtile_vec::DupRep("Duplicate", dst, scalarValue, BitMask("Duplicate", mask, 256 / sizeof(T)), repeatTime,
        dstBlockStride, dstRepeatStride);
}

// ====================================================================== compare / select
namespace cvtile_vec {
using namespace ::cvtile_twin;
template <typename T>
inline bool Cmp(CMPMODE m, T a, T b)
{
    using namespace ::cvtile_twin;
    const auto x = Num<T>::Get(a);
    const auto y = Num<T>::Get(b);
    switch (m) {
        case CMPMODE::LT: return x < y;
        case CMPMODE::GT: return x > y;
        case CMPMODE::EQ: return x == y;
        case CMPMODE::LE: return x <= y;
        case CMPMODE::GE: return x >= y;
        case CMPMODE::NE: return x != y;
    }
    return false;
}
template <typename T, typename U, typename Get1>
inline void CompareImpl(const char* api, const LocalTensor<U>& dst, const LocalTensor<T>& src0, CMPMODE mode,
    uint32_t count, Get1 get1)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAiv(api);
    if (Cfg().arch == 22 && std::is_same<T, int32_t>::value && mode != CMPMODE::EQ) {
        Fail(api, "int32_t supports CMPMODE::EQ only on arch22");
    }
    uint64_t n = count;
    if ((static_cast<uint64_t>(count) * sizeof(T)) % 256 != 0) {
        char m[200];
        std::snprintf(m, sizeof(m),
            "count %u x %zu bytes is not a multiple of 256 bytes; the chip compares only the first %llu elements",
            count, sizeof(T), static_cast<unsigned long long>(count * sizeof(T) / 256 * 256 / sizeof(T)));
        Strict(api, m);
        n = static_cast<uint64_t>(count) * sizeof(T) / 256 * 256 / sizeof(T);
    }
    if (n == 0) {
        return;
    }
    const uint8_t* a = UbOperand(c, api, "src0", src0, n);
    uint8_t* d = UbOperand(c, api, "dst", dst, n / 8);
    std::vector<uint8_t> bits(n / 8, 0);
    for (uint64_t i = 0; i < n; ++i) {
        if (Cmp<T>(mode, Ld<T>(a + i * sizeof(T)), get1(i))) {
            bits[i / 8] = static_cast<uint8_t>(bits[i / 8] | (1u << (i % 8)));
        }
    }
    std::memcpy(d, bits.data(), bits.size());
}
} // namespace cvtile_vec

template <typename T, typename U>
inline CVT_ENABLE(cvtile_api::IsCmp<T>::value && cvtile_api::IsMaskT<U>::value) Compare(
    const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode, uint32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "Compare";
    Core* c = NeedAiv(api);
    const uint64_t n = static_cast<uint64_t>(count) * sizeof(T) / 256 * 256 / sizeof(T);
    const uint8_t* b = UbOperand(c, api, "src1", src1, n);
    cvtile_vec::CompareImpl(api, dst, src0, cmpMode, count, [b](uint64_t i) { return Ld<T>(b + i * sizeof(T)); });
}
template <typename T, typename U>
inline CVT_ENABLE(cvtile_api::IsCmp<T>::value && cvtile_api::IsMaskT<U>::value) Compares(
    const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode, uint32_t count)
{
    using namespace ::cvtile_twin;
    cvtile_vec::CompareImpl("Compares", dst, src0, cmpMode, count, [src1Scalar](uint64_t) { return src1Scalar; });
}
template <typename T, typename U>
inline CVT_ENABLE(cvtile_api::IsCmp<T>::value && cvtile_api::IsMaskT<U>::value) CompareScalar(
    const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode, uint32_t count)
{
    using namespace ::cvtile_twin;
    cvtile_vec::CompareImpl("CompareScalar", dst, src0, cmpMode, count, [src1Scalar](uint64_t) { return src1Scalar; });
}

namespace cvtile_vec {
using namespace ::cvtile_twin;
inline void SelectScratch(const char* api, Core* c)
{
    using namespace ::cvtile_twin;
    // arch22 Select (modes 1 and 2) stages its operand through a temporary at UB byte 188416 (the reserved top
    // 8 KB of the 192 KB UB); the twin clobbers 128 bytes there so that live data in the reserve is caught.
    if (Cfg().arch == 22 && Cfg().cap[HwIdx(HW::UB)] >= 188416 + 128) {
        std::memset(SpacePtr(c, api, "scratch", HW::UB, 188416, 128), 0xFF, 128);
    }
}
template <typename T, typename U, typename Get1>
inline void SelectImpl(const char* api, const LocalTensor<T>& dst, const LocalTensor<U>& selMask,
    const LocalTensor<T>& src0, SELMODE mode, uint32_t count, Get1 get1)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAiv(api);
    if (mode == SELMODE::VSEL_CMPMASK_SPR) {
        Fail(api, "SELMODE::VSEL_CMPMASK_SPR needs SetCmpMask, which this subset does not include");
    }
    if (count == 0) {
        return;
    }
    uint8_t* d = UbOperand(c, api, "dst", dst, count);
    const uint8_t* a = UbOperand(c, api, "src0", src0, count);
    const uint8_t* m = TensorBytes(c, api, "selMask", selMask, 0, (count + 7) / 8);
    NeedHw(api, "selMask", selMask, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, "selMask", HW::UB, selMask.cvtAddr_, 32);
    std::vector<T> out(count);
    for (uint32_t i = 0; i < count; ++i) {
        const bool bit = ((m[i / 8] >> (i % 8)) & 1u) != 0;
        out[i] = bit ? Ld<T>(a + i * sizeof(T)) : get1(i);
    }
    for (uint32_t i = 0; i < count; ++i) {
        St<T>(d + i * sizeof(T), out[i]);
    }
    SelectScratch(api, c);
}
} // namespace cvtile_vec
template <typename T, typename U>
inline CVT_ENABLE(cvtile_api::IsSel<T>::value && cvtile_api::IsSelMaskT<U>::value) Select(const LocalTensor<T>& dst,
    const LocalTensor<U>& selMask, const LocalTensor<T>& src0, const LocalTensor<T>& src1, SELMODE selMode,
    uint32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "Select(tensor, tensor)";
    Core* c = NeedAiv(api);
    if (selMode != SELMODE::VSEL_TENSOR_TENSOR_MODE && selMode != SELMODE::VSEL_CMPMASK_SPR) {
        Fail(api, "a tensor src1 needs SELMODE::VSEL_TENSOR_TENSOR_MODE");
    }
    const uint8_t* b = UbOperand(c, api, "src1", src1, count);
    cvtile_vec::SelectImpl(api, dst, selMask, src0, selMode, count, [b](uint32_t i) { return Ld<T>(b + i * sizeof(T)); });
}
template <typename T, typename U>
inline CVT_ENABLE(cvtile_api::IsSel<T>::value && cvtile_api::IsSelMaskT<U>::value) Select(const LocalTensor<T>& dst,
    const LocalTensor<U>& selMask, const LocalTensor<T>& src0, T src1, SELMODE selMode, uint32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "Select(tensor, scalar)";
    if (selMode != SELMODE::VSEL_TENSOR_SCALAR_MODE) {
        Fail(api, "a scalar src1 needs SELMODE::VSEL_TENSOR_SCALAR_MODE");
    }
    cvtile_vec::SelectImpl(api, dst, selMask, src0, selMode, count, [src1](uint32_t) { return src1; });
}

// ====================================================================== cast
namespace cvtile_vec {
using namespace ::cvtile_twin;
template <typename T, typename U>
inline void CastCheck(const char* api, RoundMode m)
{
    using namespace ::cvtile_twin;
    if (!CastModeOk(DtOf<T>(), DtOf<U>(), m)) {
        Fail(api, "%s -> %s does not support RoundMode::%s on arch%d", TypeName<U>(), TypeName<T>(), RoundName(m),
            Cfg().arch);
    }
}
template <typename T, typename U>
inline T CastOne(U v, Rnd r)
{
    using namespace ::cvtile_twin;
    return FromLd<T>(ToLd<U>(v), r, DtOf<U>());
}
} // namespace cvtile_vec
template <typename T, typename U>
inline CVT_ENABLE(cvtile_api::CastOk<T, U>::value)
    Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "Cast";
    cvtile_vec::CastCheck<T, U>(api, roundMode);
    const Rnd r = ToRnd(roundMode);
    CountMap1(api, dst, src, count, [r](U v) { return cvtile_vec::CastOne<T, U>(v, r); });
}
template <typename T, typename U, bool isSetMask>
inline CVT_ENABLE(cvtile_api::CastOk<T, U>::value) Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src,
    const RoundMode& roundMode, const uint64_t mask, const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    const char* api = "Cast";
    NeedSetMask<isSetMask>(api);
    cvtile_vec::CastCheck<T, U>(api, roundMode);
    const Rnd r = ToRnd(roundMode);
    const uint32_t lanes = 256 / static_cast<uint32_t>(std::max(sizeof(T), sizeof(U)));
    RepMap1(api, dst, src, CountMask(api, mask, lanes), lanes, repeatTime, repeatParams,
        [r](U v) { return cvtile_vec::CastOne<T, U>(v, r); });
}

// ====================================================================== reductions
namespace cvtile_vec {
using namespace ::cvtile_twin;
// elements needed in sharedTmpBuffer for the count forms of ReduceMax/ReduceMin (see README)
inline uint64_t ReduceMaxTmpNeed(uint64_t count, size_t esz, bool calIndex)
{
    using namespace ::cvtile_twin;
    const uint64_t eb = 32 / esz;
    const uint64_t er = 256 / esz;
    auto up = [](uint64_t a, uint64_t b) { return (a + b - 1) / b; };
    const uint64_t rep1 = std::max<uint64_t>(1, up(count, er));
    const uint64_t it1 = rep1 * 2;
    if (!calIndex) {
        return up(it1, eb) * eb;
    }
    const uint64_t start2 = up(it1, eb) * eb;
    const uint64_t it2 = up(it1, er) * 2;
    const uint64_t end2 = up(it2, eb) * eb;
    uint64_t need = start2 + end2;
    if (it2 > 2) {
        const uint64_t it3 = up(it2, er) * 2;
        need = start2 + end2 + up(it3, eb) * eb;
    }
    return need;
}

template <typename T>
inline void ReduceMaxMin(const char* api, bool isMax, const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const LocalTensor<T>& tmp, int32_t count, bool calIndex)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAiv(api);
    CheckCount(api, count);
    if (count == 0) {
        return;
    }
    const uint8_t* s = UbOperand(c, api, "src", src, count);
    const uint64_t need = Cfg().arch == 35 ? 0 : ReduceMaxTmpNeed(count, sizeof(T), calIndex);
    uint8_t* w = UbOperand(c, api, "sharedTmpBuffer", tmp, need);
    if (need > 0 && tmp.GetSize() < need) {
        Fail(api, "sharedTmpBuffer holds %u elements; count %d%s needs %llu", tmp.GetSize(), count,
            calIndex ? " with calIndex" : "", static_cast<unsigned long long>(need));
    }
    NeedHw(api, "dst", dst, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, "dst", HW::UB, dst.cvtAddr_, calIndex ? 2 * sizeof(T) : sizeof(T));
    uint8_t* d = TensorBytes(c, api, "dst", dst, 0, calIndex ? 2 * sizeof(T) : sizeof(T));
    float best = static_cast<float>(Ld<T>(s));
    uint32_t bi = 0;
    for (int32_t i = 1; i < count; ++i) {
        const float v = static_cast<float>(Ld<T>(s + i * sizeof(T)));
        if (isMax ? (v > best) : (v < best)) {
            best = v;
            bi = static_cast<uint32_t>(i);
        }
    }
    // the first round's (value, index) pairs land in the work buffer, as on the chip
    const uint32_t er = 256 / sizeof(T);
    for (uint32_t r = 0; need > 0 && r * er < static_cast<uint32_t>(count) && 2 * r + 1 < need; ++r) {
        float rb = static_cast<float>(Ld<T>(s + r * er * sizeof(T)));
        uint32_t ri = 0;
        for (uint32_t j = 1; j < er && r * er + j < static_cast<uint32_t>(count); ++j) {
            const float v = static_cast<float>(Ld<T>(s + (r * er + j) * sizeof(T)));
            if (isMax ? (v > rb) : (v < rb)) {
                rb = v;
                ri = j;
            }
        }
        St<T>(w + 2 * r * sizeof(T), T(rb));
        PutIndex<T>(w + (2 * r + 1) * sizeof(T), ri);
    }
    St<T>(d, T(best));
    if (calIndex) {
        if (sizeof(T) == 2 && bi > 65535) {
            Fail(api, "the index %u does not fit the 16-bit index of a half reduction", bi);
        }
        PutIndex<T>(d + sizeof(T), bi);
    }
}
} // namespace cvtile_vec

template <typename T>
inline CVT_ENABLE(cvtile_api::IsReduce<T>::value) ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex)
{
    using namespace ::cvtile_twin;
    cvtile_vec::ReduceMaxMin("ReduceMax", true, dst, src, sharedTmpBuffer, count, calIndex);
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsReduce<T>::value) ReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex)
{
    using namespace ::cvtile_twin;
    cvtile_vec::ReduceMaxMin("ReduceMin", false, dst, src, sharedTmpBuffer, count, calIndex);
}
// Count form: every 256-byte repeat is summed by a pairwise tree (float working precision, the result
// rounded to T), then the repeat sums are added in order (each partial sum rounded to T).
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsReduce<T>::value) ReduceSum(
    const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer, const int32_t count)
{
    using namespace ::cvtile_twin;
    const char* api = "ReduceSum";
    NeedSetMask<isSetMask>(api);
    Core* c = NeedAiv(api);
    CheckCount(api, count);
    if (count == 0) {
        return;
    }
    const uint8_t* s = UbOperand(c, api, "src", src, count);
    UbOperand(c, api, "sharedTmpBuffer", sharedTmpBuffer, 0);
    NeedHw(api, "dst", dst, HW::UB, "VECIN/VECOUT/VECCALC");
    CheckAlign(api, "dst", HW::UB, dst.cvtAddr_, sizeof(T));
    uint8_t* d = TensorBytes(c, api, "dst", dst, 0, sizeof(T));
    const uint32_t er = 256 / sizeof(T);
    std::vector<float> lane(er);
    float total = 0.0f;
    for (uint32_t r = 0; r * er < static_cast<uint32_t>(count); ++r) {
        for (uint32_t j = 0; j < er; ++j) {
            const uint32_t i = r * er + j;
            lane[j] = i < static_cast<uint32_t>(count) ? static_cast<float>(Ld<T>(s + i * sizeof(T))) : 0.0f;
        }
        const float rs = static_cast<float>(T(TreeSum(lane)));
        total = r == 0 ? rs : static_cast<float>(T(total + rs));
    }
    St<T>(d, T(total));
}

namespace cvtile_vec {
using namespace ::cvtile_twin;
template <typename T>
inline void RepeatReduce(const char* api, ReduceType type, const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const Mask& mk, int32_t repeat, int32_t dstRepStride, int32_t srcBlkStride, int32_t srcRepStride,
    ReduceOrder order)
{
    using namespace ::cvtile_twin;
    Core* c = NeedAiv(api);
    if (repeat < 0 || repeat > 255) {
        Fail(api, "repeatTime %d is outside 0..255", repeat);
    }
    if (dstRepStride < 0 || srcBlkStride < 0 || srcRepStride < 0 || dstRepStride > 65535 || srcBlkStride > 65535 ||
        srcRepStride > 65535) {
        Fail(api, "strides must be in 0..65535 (dstRepStride %d, srcBlkStride %d, srcRepStride %d)", dstRepStride,
            srcBlkStride, srcRepStride);
    }
    UbOperand(c, api, "src", src, 0);
    NeedHw(api, "dst", dst, HW::UB, "VECIN/VECOUT/VECCALC");
    uint32_t unit = sizeof(T);
    if (type != ReduceType::SUM) {
        unit = (order == ReduceOrder::ORDER_ONLY_VALUE) ? sizeof(T)
               : (order == ReduceOrder::ORDER_ONLY_INDEX ? 4u : 2u * sizeof(T));
    }
    CheckAlign(api, "dst", HW::UB, dst.cvtAddr_, unit);
    const uint32_t lanes = 256 / sizeof(T);
    const RepOp os{src.cvtAddr_, sizeof(T), static_cast<uint32_t>(srcBlkStride), static_cast<uint32_t>(srcRepStride)};
    std::vector<float> v(lanes);
    for (int32_t r = 0; r < repeat; ++r) {
        uint8_t* d = TensorBytes(c, api, "dst", dst, static_cast<uint64_t>(r) * dstRepStride * unit, unit);
        if (type == ReduceType::SUM) {
            for (uint32_t j = 0; j < lanes; ++j) {
                v[j] = mk.On(j) ? static_cast<float>(Ld<T>(LanePtr(c, api, "src", LaneAddr(os, r, j), sizeof(T))))
                                : 0.0f;
            }
            St<T>(d, T(TreeSum(v)));
            continue;
        }
        bool have = false;
        float best = 0.0f;
        uint32_t bi = 0;
        for (uint32_t j = 0; j < lanes; ++j) {
            if (!mk.On(j)) {
                continue;
            }
            const float x = static_cast<float>(Ld<T>(LanePtr(c, api, "src", LaneAddr(os, r, j), sizeof(T))));
            if (!have || (type == ReduceType::MAX ? x > best : x < best)) {
                best = x;
                bi = j;
                have = true;
            }
        }
        if (!have) {
            continue;
        }
        switch (order) {
            case ReduceOrder::ORDER_VALUE_INDEX:
                St<T>(d, T(best));
                PutIndex<T>(d + sizeof(T), bi);
                break;
            case ReduceOrder::ORDER_INDEX_VALUE:
                PutIndex<T>(d, bi);
                St<T>(d + sizeof(T), T(best));
                break;
            case ReduceOrder::ORDER_ONLY_VALUE: St<T>(d, T(best)); break;
            case ReduceOrder::ORDER_ONLY_INDEX: St<uint32_t>(d, bi); break;
        }
    }
}
} // namespace cvtile_vec

template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsReduce<T>::value) WholeReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const int32_t mask, const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
    const int32_t srcRepStride, ReduceOrder order)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("WholeReduceMax");
    cvtile_vec::RepeatReduce("WholeReduceMax", ReduceType::MAX, dst, src,
        CountMask("WholeReduceMax", static_cast<uint64_t>(mask), 256 / sizeof(T)), repeatTime, dstRepStride,
        srcBlkStride, srcRepStride, order);
}
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsReduce<T>::value) WholeReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const int32_t mask, const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
    const int32_t srcRepStride, ReduceOrder order)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("WholeReduceMin");
    cvtile_vec::RepeatReduce("WholeReduceMin", ReduceType::MIN, dst, src,
        CountMask("WholeReduceMin", static_cast<uint64_t>(mask), 256 / sizeof(T)), repeatTime, dstRepStride,
        srcBlkStride, srcRepStride, order);
}
template <typename T, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsReduce<T>::value) WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const int32_t mask, const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
    const int32_t srcRepStride)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("WholeReduceSum");
    cvtile_vec::RepeatReduce("WholeReduceSum", ReduceType::SUM, dst, src,
        CountMask("WholeReduceSum", static_cast<uint64_t>(mask), 256 / sizeof(T)), repeatTime, dstRepStride,
        srcBlkStride, srcRepStride, ReduceOrder::ORDER_VALUE_INDEX);
}
template <ReduceType reduceType, typename T, typename U, bool isSetMask>
inline CVT_ENABLE(cvtile_api::IsReduce<T>::value && std::is_same<T, U>::value) ReduceRepeat(const LocalTensor<T>& dst,
    const LocalTensor<U>& src, const int32_t mask, const int32_t repeatTime, const int32_t dstRepStride,
    const int32_t srcBlkStride, const int32_t srcRepStride, ReduceOrder order)
{
    using namespace ::cvtile_twin;
    NeedSetMask<isSetMask>("ReduceRepeat");
    if (reduceType == ReduceType::NONE) {
        Fail("ReduceRepeat", "ReduceType::NONE is not a reduction");
    }
    cvtile_vec::RepeatReduce("ReduceRepeat", reduceType, dst, src,
        CountMask("ReduceRepeat", static_cast<uint64_t>(mask), 256 / sizeof(T)), repeatTime, dstRepStride,
        srcBlkStride, srcRepStride, order);
}

// ====================================================================== Brcb
template <typename T>
inline CVT_ENABLE(cvtile_api::IsBrcb<T>::value) Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src,
    const uint8_t repeatTime, const BrcbRepeatParams& repeatParams)
{
    using namespace ::cvtile_twin;
    const char* api = "Brcb";
    Core* c = NeedAiv(api);
    if (repeatTime == 0) {
        return;
    }
    if (repeatParams.dstBlkStride == 0) {
        Fail(api, "dstBlkStride 0 is undefined on the chip");
    }
    const uint8_t* s = UbOperand(c, api, "src", src, 8ull * repeatTime);
    UbOperand(c, api, "dst", dst, 0);
    const uint64_t per = 32 / sizeof(T);
    const uint64_t dSpan = (static_cast<uint64_t>(repeatTime - 1) * repeatParams.dstRepStride +
                            7ull * repeatParams.dstBlkStride + 1) * 32;
    CheckOverlap(api, "dst", dst.cvtAddr_, dSpan, "src", src.cvtAddr_, 8ull * repeatTime * sizeof(T));
    if (dst.cvtAddr_ == src.cvtAddr_) {
        Fail(api, "src and dst must not share memory");
    }
    std::vector<T> in(8ull * repeatTime);
    for (size_t i = 0; i < in.size(); ++i) {
        in[i] = Ld<T>(s + i * sizeof(T));
    }
    for (uint32_t r = 0; r < repeatTime; ++r) {
        for (uint32_t j = 0; j < 8; ++j) {
            const uint64_t off = (static_cast<uint64_t>(r) * repeatParams.dstRepStride +
                                     static_cast<uint64_t>(j) * repeatParams.dstBlkStride) * 32;
            uint8_t* d = TensorBytes(c, api, "dst", dst, off, 32);
            for (uint64_t e = 0; e < per; ++e) {
                St<T>(d + e * sizeof(T), in[r * 8 + j]);
            }
        }
    }
}

// ====================================================================== ArithProgression / Arange
namespace cvtile_vec {
using namespace ::cvtile_twin;
// Element arithmetic of the progression in T: floats as the vector unit (float, one rounding to T),
// integers wrapping at T's width.
template <typename T, bool F = IsFloatish<T>::value>
struct Ap;
template <typename T>
struct Ap<T, true> {
    static CVTILE_NOFMA T Add(T a, T b) { return T(static_cast<float>(a) + static_cast<float>(b)); }
    static CVTILE_NOFMA T Mul(T a, T b) { return T(static_cast<float>(a) * static_cast<float>(b)); }
    static T Index(uint64_t i) { return T(static_cast<float>(i)); }
    // arch22 scalar head: firstValue + diffValue * i in float (half: in float, then one rounding to half)
    static CVTILE_NOFMA T Head(T f, T d, uint64_t i)
    {
        const float p = static_cast<float>(d) * static_cast<float>(i);
        return T(static_cast<float>(f) + p);
    }
    // arch22 Adds step: diffValue * n in float, rounded to T
    static CVTILE_NOFMA T Step(T d, uint64_t n) { return T(static_cast<float>(d) * static_cast<float>(n)); }
    static double Show(T v) { return static_cast<double>(static_cast<float>(v)); }
};
template <typename T>
struct Ap<T, false> {
    using U = typename std::make_unsigned<T>::type;
    static T W(uint64_t v) { return static_cast<T>(static_cast<U>(v)); }
    static uint64_t B(T v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }
    static T Add(T a, T b) { return W(B(a) + B(b)); }
    static T Mul(T a, T b) { return W(B(a) * B(b)); }
    static T Index(uint64_t i) { return W(i); }
    static T Head(T f, T d, uint64_t i) { return W(B(f) + B(d) * i); }
    static T Step(T d, uint64_t n) { return W(B(d) * n); }
    static double Show(T v) { return static_cast<double>(v); }
};

template <typename T>
inline void ArithProg(const char* api, const LocalTensor<T>& dst, const T first, const T diff, const int32_t count)
{
    using A = Ap<T>;
    Core* c = NeedAiv(api);
    if (count <= 0) {
        Fail(api, "count %d must be greater than 0", count);
    }
    if (!(static_cast<float>(diff) >= 0.0f)) {
        Fail(api, "diffValue %.9g must be greater than or equal to 0", A::Show(diff));
    }
    if (static_cast<uint32_t>(count) > dst.GetSize()) {
        Fail(api, "count %d exceeds the %u elements of dst (dst must hold count * sizeof(T) bytes)", count,
            dst.GetSize());
    }
    const uint64_t n = static_cast<uint64_t>(count);
    std::vector<T> v;
#if CVTILE_ARCH35
    // one register of L lanes: base[l] = l*diff + first; each further repeat adds L*diff to the register
    const uint64_t L = sizeof(T) == 8 ? 64 : 256 / sizeof(T);
    std::vector<T> reg(L);
    for (uint64_t l = 0; l < L; ++l) {
        reg[l] = A::Add(A::Mul(A::Index(l), diff), first);
    }
    const T step = A::Mul(A::Index(L), diff);
    v.resize(n);
    for (uint64_t r = 0; r * L < n; ++r) {
        for (uint64_t l = 0; l < L && r * L + l < n; ++l) {
            v[r * L + l] = reg[l];
        }
        for (uint64_t l = 0; l < L; ++l) {
            reg[l] = A::Add(reg[l], step);
        }
    }
#else
    // scalar head of E = 32/sizeof(T) elements, then Adds block by block (step E*diff) up to one repeat,
    // then repeat by repeat (step R*diff); the Adds write whole 32-byte blocks
    const uint64_t E = 32 / sizeof(T);
    const uint64_t R = 256 / sizeof(T);
    const uint64_t w = n <= E ? n : (n + E - 1) / E * E;
    v.resize(w);
    for (uint64_t i = 0; i < std::min(n, E); ++i) {
        v[i] = A::Head(first, diff, i);
    }
    if (n > E) {
        const T stepE = A::Step(diff, E);
        const uint64_t blocks = n > R ? R / E : w / E;
        for (uint64_t i = E; i < blocks * E; ++i) {
            v[i] = A::Add(v[i - E], stepE);
        }
        if (n > R) {
            const T stepR = A::Step(diff, R);
            for (uint64_t i = R; i < w; ++i) {
                v[i] = A::Add(v[i - R], stepR);
            }
        }
    }
#endif
    uint8_t* d = UbOperand(c, api, "dst", dst, v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        St<T>(d + i * sizeof(T), v[i]);
    }
}
} // namespace cvtile_vec

template <typename T>
inline CVT_ENABLE(cvtile_api::IsArithProg<T>::value)
    ArithProgression(const LocalTensor<T>& dst, const T firstValue, const T diffValue, const int32_t count)
{
    cvtile_vec::ArithProg("ArithProgression", dst, firstValue, diffValue, count);
}
template <typename T>
inline CVT_ENABLE(cvtile_api::IsArithProg<T>::value)
    Arange(const LocalTensor<T>& dst, const T firstValue, const T diffValue, const int32_t count)
{
    cvtile_vec::ArithProg("Arange", dst, firstValue, diffValue, count);
}

} // namespace AscendC

#endif // CVTILE_TWIN_API_H
