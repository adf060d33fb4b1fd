// cvtile: declaration header of the Ascend C API subset that the cvtile emitter uses.
//
// Written for the cvtile project from the public API reference (asc-devkit docs and
// include/basic_api/*.h signatures). It declares types, enums, parameter structs and
// function/class templates with their real names, field names and signatures; it holds no
// implementation. Two uses:
//   1. syntax check of an emitted kernel on a plain x86 g++:
//        g++ -std=c++17 -fsyntax-only -Wall -Werror -I <this dir> <arch macros> -DASCENDC_CPU_DEBUG=1 k.cpp
//      (arch macros: -D__NPU_ARCH__=2201 -D__DAV_C220__ -D__DAV_C220_CUBE__ -D__DAV_CUBE__, or
//       the _VEC__ pair; -D__NPU_ARCH__=3510 -D__DAV_C310__ with _CUBE__/_VEC__).
//   2. the single source of declarations of the CPU twin (../twin/kernel_operator.h includes
//      this file and defines every function declared here; a signature that drifts becomes an
//      undefined reference or an ambiguous overload in the twin build).
// Data types accepted by each template follow the per-product type tables of the public docs
// (Atlas A2 = __NPU_ARCH__ 2201, Ascend 950 = 3510); a call outside them fails overload
// resolution, as the real toolchain rejects it. See ../README.md for the semantics.
#ifndef CVTILE_DECL_KERNEL_OPERATOR_H
#define CVTILE_DECL_KERNEL_OPERATOR_H

#include <cstddef>
#include <cstdint>
#include <type_traits>

#ifndef __NPU_ARCH__
#define __NPU_ARCH__ 2201
#endif
#if (__NPU_ARCH__ != 2201) && (__NPU_ARCH__ != 3510)
#error "cvtile kernel_operator.h covers __NPU_ARCH__ 2201 (Atlas A2/A3) and 3510 (Ascend 950) only"
#endif
#if __NPU_ARCH__ == 3510
#define CVTILE_ARCH35 1
#else
#define CVTILE_ARCH35 0
#endif

// CVTILE_INL is empty for the syntax check; the twin defines it as `inline` before including.
#ifndef CVTILE_INL
#define CVTILE_INL
#endif

// ---------------------------------------------------------------- qualifiers and macros
#define __global__
#define __aicore__
#define __gm__
#define __ubuf__
#define __cbuf__
#define __ca__
#define __cb__
#define __cc__
#define __fbuf__
#define __biasbuf__
#define __host__
#define __inout_pipe__(...)
#define __in_pipe__(...)
#define __out_pipe__(...)
#define GM_ADDR __gm__ uint8_t*

enum KernelMetaType : uint8_t {
    KERNEL_TYPE_AIV_ONLY,
    KERNEL_TYPE_AIC_ONLY,
    KERNEL_TYPE_MIX_AIV_1_0,
    KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1,
    KERNEL_TYPE_MIX_AIC_1_2,
    KERNEL_TYPE_AICORE,
    KERNEL_TYPE_VECTORCORE,
    KERNEL_TYPE_MIX_AICORE,
    KERNEL_TYPE_MIX_VECTOR_CORE,
    KERNEL_TYPE_MAX,
};

// Hardware pipes (names as in the ISA; the numeric values are this header's own).
enum pipe_t {
    PIPE_S = 0,
    PIPE_V,
    PIPE_M,
    PIPE_MTE1,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_ALL,
    PIPE_MTE4,
    PIPE_MTE5,
    PIPE_V2,
    PIPE_FIX,
    PIPE_NUM,
};

enum event_t {
    EVENT_ID0 = 0,
    EVENT_ID1,
    EVENT_ID2,
    EVENT_ID3,
    EVENT_ID4,
    EVENT_ID5,
    EVENT_ID6,
    EVENT_ID7,
};

enum QuantMode_t {
    NoQuant,
    F322F16,
    F322BF16,
    DEQF16,
    VDEQF16,
    QF322B8_PRE,
    VQF322B8_PRE,
    REQ8,
    VREQ8,
#if CVTILE_ARCH35
    QF322FP8_PRE,
    VQF322FP8_PRE,
    QF322HIF8_PRE,
    VQF322HIF8_PRE,
    QF322HIF8_PRE_HYBRID,
    VQF322HIF8_PRE_HYBRID,
    QS322BF16_PRE,
    VQS322BF16_PRE,
    QF322F16_PRE,
    VQF322F16_PRE,
    QF322BF16_PRE,
    VQF322BF16_PRE,
    QF322F32_PRE,
    VQF322F32_PRE,
#endif
};

// ---------------------------------------------------------------- 16-bit float types
// IEEE binary16; `val` holds the bits. Conversions round to nearest even.
struct half {
    uint16_t val;
    half() = default;
    half(const half& fp) = default;
    CVTILE_INL half(const float& fVal);
    CVTILE_INL half(const double& dVal);
    CVTILE_INL half(const int8_t& iVal);
    CVTILE_INL half(const uint8_t& iVal);
    CVTILE_INL half(const int16_t& iVal);
    CVTILE_INL half(const uint16_t& iVal);
    CVTILE_INL half(const int32_t& iVal);
    CVTILE_INL half(const uint32_t& iVal);
    half& operator=(const half& fp) = default;
    CVTILE_INL half operator+(const half fp) const;
    CVTILE_INL half operator-() const;
    CVTILE_INL half operator-(const half fp) const;
    CVTILE_INL half operator*(const half fp) const;
    CVTILE_INL half operator/(const half fp) const;
    CVTILE_INL half operator+=(const half fp);
    CVTILE_INL half operator-=(const half fp);
    CVTILE_INL half operator*=(const half fp);
    CVTILE_INL half operator/=(const half fp);
    CVTILE_INL bool operator==(const half& fp) const;
    CVTILE_INL bool operator!=(const half& fp) const;
    CVTILE_INL bool operator>(const half& fp) const;
    CVTILE_INL bool operator>=(const half& fp) const;
    CVTILE_INL bool operator<(const half& fp) const;
    CVTILE_INL bool operator<=(const half& fp) const;
    CVTILE_INL operator float() const;
    CVTILE_INL operator double() const;
};

namespace bfloat16 {
// bfloat16 (8-bit exponent, 7-bit mantissa); `val` holds the bits. From float: round to nearest even.
struct Bf16T {
    uint16_t val;
    Bf16T() = default;
    Bf16T(const Bf16T& bf) = default;
    CVTILE_INL Bf16T(const float& fVal);
    Bf16T& operator=(const Bf16T& fp) = default;
    CVTILE_INL Bf16T operator+(const Bf16T fp) const;
    CVTILE_INL Bf16T operator-() const;
    CVTILE_INL Bf16T operator-(const Bf16T fp) const;
    CVTILE_INL operator float() const;
    CVTILE_INL float ToFloat() const;
};
} // namespace bfloat16
using bfloat16_t = bfloat16::Bf16T;

// Core-type query behind ASCEND_IS_AIC / ASCEND_IS_AIV (a run-time test, as in CPU-debug mode).
CVTILE_INL int32_t cvtile_core_type();
// Check behind KERNEL_TASK_TYPE_DEFAULT (the twin compares it with the launch type).
CVTILE_INL void cvtile_kernel_task_type(KernelMetaType value);

#define ASCEND_IS_AIV (cvtile_core_type() == AscendC::AIV)
#define ASCEND_IS_AIC (cvtile_core_type() == AscendC::AIC)
#define ASCEND_IS_NOT_AIV (cvtile_core_type() != AscendC::AIV)
#define ASCEND_IS_NOT_AIC (cvtile_core_type() != AscendC::AIC)
#define KERNEL_TASK_TYPE_DEFAULT(value) cvtile_kernel_task_type(value)

namespace AscendC {
constexpr int32_t MIX = 0;
constexpr int32_t AIC = 1;
constexpr int32_t AIV = 2;

namespace cvtile_api {
// project helpers for declaration-level type checks (not Ascend C API)
template <bool B>
struct EnableVoid {};
template <>
struct EnableVoid<true> {
    using type = void;
};
template <typename T, typename... Ts>
struct OneOf : std::false_type {};
template <typename T, typename U, typename... Ts>
struct OneOf<T, U, Ts...> : std::integral_constant<bool, std::is_same<T, U>::value || OneOf<T, Ts...>::value> {};
template <typename T>
using IsVecFloat = OneOf<T, half, float>;
#if CVTILE_ARCH35
template <typename T>
using IsVecArith = OneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
template <typename T>
using IsVecMul = OneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
template <typename T>
using IsVecDiv = OneOf<T, int16_t, uint16_t, half, int32_t, uint32_t, float>;
template <typename T>
using IsVecScalar = OneOf<T, int16_t, half, bfloat16_t, int32_t, float>;
template <typename T>
using IsVecAbs = OneOf<T, int16_t, half, int32_t, float>;
template <typename T>
using IsDup = OneOf<T, int8_t, uint8_t, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
template <typename T>
using IsCmp = OneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
template <typename T>
using IsSel = OneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
template <typename T>
using IsBrcb = OneOf<T, int8_t, uint8_t, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
// And / Or: repeat forms; the count form also takes the 8-bit and 64-bit integers
template <typename T>
using IsBitRep = OneOf<T, int16_t, uint16_t, int32_t, uint32_t>;
template <typename T>
using IsBitCnt = OneOf<T, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>;
// Not: as And / Or plus half and float
template <typename T>
using IsNotRep = OneOf<T, int16_t, uint16_t, half, int32_t, uint32_t, float>;
template <typename T>
using IsNotCnt = OneOf<T, int8_t, uint8_t, int16_t, uint16_t, half, int32_t, uint32_t, float, int64_t, uint64_t>;
template <typename T>
using IsArithProg = OneOf<T, int16_t, half, int32_t, float, int64_t>;
#else
template <typename T>
using IsVecArith = OneOf<T, int16_t, half, int32_t, float>;
template <typename T>
using IsVecMul = OneOf<T, int16_t, half, int32_t, float>;
template <typename T>
using IsVecDiv = OneOf<T, half, float>;
template <typename T>
using IsVecScalar = OneOf<T, int16_t, half, int32_t, float>;
template <typename T>
using IsVecAbs = OneOf<T, half, float>;
template <typename T>
using IsDup = OneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
template <typename T>
using IsCmp = OneOf<T, half, float, int32_t>;
template <typename T>
using IsSel = OneOf<T, half, float>;
template <typename T>
using IsBrcb = OneOf<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;
template <typename T>
using IsBitRep = OneOf<T, int16_t, uint16_t>;
template <typename T>
using IsBitCnt = OneOf<T, int16_t, uint16_t>;
template <typename T>
using IsNotRep = OneOf<T, int16_t, uint16_t>;
template <typename T>
using IsNotCnt = OneOf<T, int16_t, uint16_t>;
template <typename T>
using IsArithProg = OneOf<T, int16_t, half, int32_t, float>;
#endif
template <typename T>
using IsRelu = OneOf<T, half, float, int32_t>;
template <typename T>
using IsReduce = OneOf<T, half, float>;
template <typename U>
using IsMaskT = OneOf<U, int8_t, uint8_t>;
template <typename U>
using IsSelMaskT = OneOf<U, uint8_t, uint16_t, uint32_t, uint64_t>;
template <typename T>
using IsCopyT = OneOf<T, int8_t, uint8_t, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float, int64_t,
    uint64_t, double>;
template <typename T>
using IsLoadT = OneOf<T, int8_t, uint8_t, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>;

// Mmad dtype combinations (dst, fm, filter)
template <typename T, typename U, typename S>
struct MmadOk
    : std::integral_constant<bool,
          (std::is_same<T, int32_t>::value && std::is_same<U, int8_t>::value && std::is_same<S, int8_t>::value) ||
              (std::is_same<T, float>::value && std::is_same<U, half>::value && std::is_same<S, half>::value) ||
              (std::is_same<T, float>::value && std::is_same<U, float>::value && std::is_same<S, float>::value) ||
              (std::is_same<T, float>::value && std::is_same<U, bfloat16_t>::value &&
                  std::is_same<S, bfloat16_t>::value)> {};
// Fixpipe dtype combinations (dst, src = L0C type)
template <typename T, typename U>
struct FixpipeOk
    : std::integral_constant<bool, (std::is_same<U, float>::value && OneOf<T, float, half, bfloat16_t, int8_t, uint8_t>::value) ||
                                       (std::is_same<U, int32_t>::value &&
#if CVTILE_ARCH35
                                           OneOf<T, int32_t, half, bfloat16_t, int8_t, uint8_t>::value
#else
                                           OneOf<T, int32_t, half, int8_t, uint8_t>::value
#endif
                                           )> {};
// Cast dtype combinations (dst T, src U); round modes are checked at run time.
template <typename T, typename U>
struct CastOk
    : std::integral_constant<bool,
          (std::is_same<U, float>::value && OneOf<T, half, bfloat16_t, int32_t, int16_t, float, int64_t>::value) ||
              (std::is_same<U, half>::value && OneOf<T, float, int32_t, int16_t, int8_t, uint8_t
#if CVTILE_ARCH35
                                                                      , bfloat16_t
#endif
                                                                      >::value) ||
              (std::is_same<U, bfloat16_t>::value && OneOf<T, float, int32_t
#if CVTILE_ARCH35
                                                                   , half
#endif
                                                                   >::value) ||
              (std::is_same<U, int32_t>::value && OneOf<T, float, int16_t, int64_t
#if CVTILE_ARCH35
                                                                 , uint8_t, uint16_t
#endif
                                                                 >::value) ||
              (std::is_same<U, int16_t>::value && OneOf<T, half, float
#if CVTILE_ARCH35
                                                                 , int32_t, uint32_t, uint8_t
#endif
                                                                 >::value) ||
              (std::is_same<U, int8_t>::value && OneOf<T, half
#if CVTILE_ARCH35
                                                                , int16_t, int32_t
#endif
                                                                >::value) ||
              (std::is_same<U, uint8_t>::value && OneOf<T, half
#if CVTILE_ARCH35
                                                                 , uint16_t, uint32_t
#endif
                                                                 >::value) ||
              (std::is_same<U, int64_t>::value && OneOf<T, int32_t, float>::value)> {};
} // namespace cvtile_api
#define CVT_ENABLE(...) typename ::AscendC::cvtile_api::EnableVoid<(__VA_ARGS__)>::type

// ---------------------------------------------------------------- enums
enum class TPosition : uint8_t {
    GM,
    A1,
    A2,
    B1,
    B2,
    C1,
    C2,
    CO1,
    CO2,
    VECIN,
    VECOUT,
    VECCALC,
    LCM = VECCALC,
    SPM,
    SHM = SPM,
    TSCM,
    C2PIPE2GM,
    C2PIPE2LOCAL,
    MAX,
};
using QuePosition = TPosition;

enum class Hardware : uint8_t { GM, UB, L1, L0A, L0B, L0C, BIAS, FIXBUF, MAX };

enum class HardEvent : uint8_t {
    MTE2_MTE1,
    MTE1_MTE2,
    MTE1_M,
    M_MTE1,
    MTE2_V,
    V_MTE2,
    MTE3_V,
    V_MTE3,
    M_V,
    V_M,
    V_V,
    MTE3_MTE1,
    MTE1_MTE3,
    MTE1_V,
    MTE2_M,
    M_MTE2,
    V_MTE1,
    M_FIX,
    FIX_M,
    MTE3_MTE2,
    MTE2_MTE3,
    S_V,
    V_S,
    S_MTE2,
    MTE2_S,
    S_MTE3,
    MTE3_S,
    MTE2_FIX,
    FIX_MTE2,
    FIX_S,
    M_S,
    FIX_MTE3,
    MTE1_FIX,
    FIX_MTE1,
    FIX_FIX,
    MAX,
};
using TEventID = int8_t;

enum class RoundMode : uint8_t {
    CAST_NONE = 0,
    CAST_RINT,
    CAST_FLOOR,
    CAST_CEIL,
    CAST_ROUND,
    CAST_TRUNC,
    CAST_ODD,
#if CVTILE_ARCH35
    CAST_HYBRID,
    CAST_EVEN,
    CAST_ZERO,
#endif
    UNKNOWN = 0xFF,
};

enum class CMPMODE : uint8_t {
    LT = 0,
    GT,
    EQ,
    LE,
    GE,
    NE,
};

enum class SELMODE : uint8_t {
    VSEL_CMPMASK_SPR = 0,
    VSEL_TENSOR_SCALAR_MODE,
    VSEL_TENSOR_TENSOR_MODE,
};

enum class ReduceMode : uint8_t {
    REDUCE_MAX = 0,
    REDUCE_MIN,
    REDUCE_SUM,
};

enum class ReduceOrder : uint8_t {
    ORDER_VALUE_INDEX = 0,
    ORDER_INDEX_VALUE,
    ORDER_ONLY_VALUE,
    ORDER_ONLY_INDEX,
};

enum class ReduceType {
    NONE = -1,
    SUM = 0,
    MAX,
    MIN,
};

enum class ClipReluMode { NOCLIP_RELU = 0, CLIP_RELU = 1 };
enum class ReluMode { NO_RELU = 0, NORMAL_RELU = 1, SCALAR_RELU = 2, VECTOR_RELU = 3 };

enum class PaddingMode : uint8_t {
    Normal = 0,
    Compact,
};

// ---------------------------------------------------------------- constants
constexpr uint32_t ONE_BLK_SIZE = 32;
constexpr uint32_t BLOCK_CUBE = 16;
constexpr int32_t DEFAULT_BLK_NUM = 8;
constexpr int32_t DEFAULT_BLK_STRIDE = 1;
constexpr uint8_t DEFAULT_REPEAT_STRIDE = 8;
constexpr uint8_t DEFAULT_DATA_COPY_NBURST = 1;
constexpr uint8_t DEFAULT_DATA_COPY_STRIDE = 0;
constexpr uint64_t MASK_PLACEHOLDER = 0;

#if CVTILE_ARCH35
enum class ExpAlgo { INTRINSIC = 0, PRECISION_1ULP_FTZ_TRUE, PRECISION_1ULP_FTZ_FALSE };
struct ExpConfig {
    ExpAlgo algo = ExpAlgo::INTRINSIC;
};
constexpr ExpConfig DEFAULT_EXP_CONFIG = {ExpAlgo::INTRINSIC};
enum class LnAlgo { INTRINSIC = 0, PRECISION_1ULP_FTZ_TRUE, PRECISION_1ULP_FTZ_FALSE };
struct LnConfig {
    LnAlgo algo = LnAlgo::INTRINSIC;
};
constexpr LnConfig DEFAULT_LN_CONFIG = {LnAlgo::INTRINSIC};
enum class ReciprocalAlgo { INTRINSIC = 0, PRECISION_1ULP_FTZ_TRUE, PRECISION_1ULP_FTZ_FALSE };
struct ReciprocalConfig {
    ReciprocalAlgo algo = ReciprocalAlgo::INTRINSIC;
};
constexpr ReciprocalConfig DEFAULT_RECIPROCAL_CONFIG = {ReciprocalAlgo::INTRINSIC};
enum class DivAlgo {
    INTRINSIC = 0,
    DIFF_COMPENSATION,
    PRECISION_1ULP_FTZ_TRUE,
    PRECISION_0ULP_FTZ_TRUE,
    PRECISION_0ULP_FTZ_FALSE,
    PRECISION_1ULP_FTZ_FALSE
};
struct DivConfig {
    DivAlgo algo = DivAlgo::INTRINSIC;
};
constexpr DivConfig DEFAULT_DIV_CONFIG = {DivAlgo::INTRINSIC};
enum class SqrtAlgo { INTRINSIC = 0, FAST_INVERSE, PRECISION_1ULP_FTZ_TRUE, PRECISION_0ULP_FTZ_FALSE, PRECISION_1ULP_FTZ_FALSE };
struct SqrtConfig {
    SqrtAlgo algo = SqrtAlgo::INTRINSIC;
};
constexpr SqrtConfig DEFAULT_SQRT_CONFIG = {SqrtAlgo::INTRINSIC};
enum class RsqrtAlgo { INTRINSIC = 0, FAST_INVERSE, PRECISION_1ULP_FTZ_TRUE, PRECISION_0ULP_FTZ_FALSE, PRECISION_1ULP_FTZ_FALSE };
struct RsqrtConfig {
    RsqrtAlgo algo = RsqrtAlgo::INTRINSIC;
};
constexpr RsqrtConfig DEFAULT_RSQRT_CONFIG = {RsqrtAlgo::INTRINSIC};
#endif

// ---------------------------------------------------------------- parameter structs
struct DataCopyParams {
    __aicore__ DataCopyParams() {}
    __aicore__ DataCopyParams(
        const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn)
    {}
    uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
    uint16_t blockLen = 0;
    union {
        uint16_t srcGap = 0;
        uint16_t srcStride;
    };
    union {
        uint16_t dstGap = 0;
        uint16_t dstStride;
    };
};

struct DataCopyPadParams {
    __aicore__ DataCopyPadParams() {}
    __aicore__ DataCopyPadParams(
        const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue, const uint64_t padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue)
    {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    uint64_t paddingValue = 0;
};

struct DataCopyExtParams {
    __aicore__ DataCopyExtParams() {}
#if CVTILE_ARCH35
    __aicore__ DataCopyExtParams(const uint16_t count, const uint32_t len, const int64_t srcStrideIn,
        const int64_t dstStrideIn, const uint32_t rsvIn)
#else
    __aicore__ DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn,
        const uint32_t dstStrideIn, const uint32_t rsvIn)
#endif
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn), rsv(rsvIn)
    {}
    uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
    uint32_t blockLen = 0;
#if CVTILE_ARCH35
    int64_t srcStride = static_cast<int64_t>(DEFAULT_DATA_COPY_STRIDE);
    int64_t dstStride = static_cast<int64_t>(DEFAULT_DATA_COPY_STRIDE);
#else
    uint32_t srcStride = DEFAULT_DATA_COPY_STRIDE;
    uint32_t dstStride = DEFAULT_DATA_COPY_STRIDE;
#endif
    uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
    __aicore__ DataCopyPadExtParams() {}
    __aicore__ DataCopyPadExtParams(
        const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue, T padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue)
    {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue = T(0);
};

struct Nd2NzParams {
    __aicore__ Nd2NzParams() {}
#if CVTILE_ARCH35
    __aicore__ Nd2NzParams(const uint16_t ndNumIn, const uint16_t nValueIn, const uint32_t dValueIn,
        const uint64_t srcNdMatrixStrideIn, const uint64_t srcDValueIn, const uint16_t dstNzC0StrideIn,
        const uint16_t dstNzNStrideIn, const uint32_t dstNzMatrixStrideIn)
#else
    __aicore__ Nd2NzParams(const uint16_t ndNumIn, const uint16_t nValueIn, const uint16_t dValueIn,
        const uint16_t srcNdMatrixStrideIn, const uint16_t srcDValueIn, const uint16_t dstNzC0StrideIn,
        const uint16_t dstNzNStrideIn, const uint16_t dstNzMatrixStrideIn)
#endif
        : ndNum(ndNumIn),
          nValue(nValueIn),
          dValue(dValueIn),
          srcNdMatrixStride(srcNdMatrixStrideIn),
          srcDValue(srcDValueIn),
          dstNzC0Stride(dstNzC0StrideIn),
          dstNzNStride(dstNzNStrideIn),
          dstNzMatrixStride(dstNzMatrixStrideIn)
    {}
    uint16_t ndNum = 0;
    uint16_t nValue = 0;
#if CVTILE_ARCH35
    uint32_t dValue = 0;
    uint64_t srcNdMatrixStride = 0;
    uint64_t srcDValue = 0;
    uint16_t dstNzC0Stride = 0;
    uint16_t dstNzNStride = 0;
    uint32_t dstNzMatrixStride = 0;
#else
    uint16_t dValue = 0;
    uint16_t srcNdMatrixStride = 0;
    uint16_t srcDValue = 0;
    uint16_t dstNzC0Stride = 0;
    uint16_t dstNzNStride = 0;
    uint16_t dstNzMatrixStride = 0;
#endif
};

using LoadData2dParams = struct LoadData2DParams;
struct LoadData2DParams {
    __aicore__ LoadData2DParams() {}
    __aicore__ LoadData2DParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
        const uint8_t sidIn, const uint16_t dstGapIn, const bool ifTransposeIn, const uint8_t addrModeIn)
        : startIndex(startIndexIn),
          dstGap(dstGapIn),
          srcStride(srcStrideIn),
          ifTranspose(ifTransposeIn),
          repeatTimes(repeatTimesIn),
          sid(sidIn),
          addrMode(addrModeIn)
    {}
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = 0;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};

struct LoadData2dTransposeParams {
    __aicore__ LoadData2dTransposeParams() {}
    __aicore__ LoadData2dTransposeParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn,
        const uint16_t srcStrideIn, const uint16_t dstGapIn, const uint16_t dstfracGapIn, const uint8_t addrModeIn)
        : startIndex(startIndexIn),
          repeatTimes(repeatTimesIn),
          srcStride(srcStrideIn),
          dstGap(dstGapIn),
          dstFracGap(dstfracGapIn),
          addrMode(addrModeIn)
    {}
    __aicore__ LoadData2dTransposeParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn,
        const uint16_t srcStrideIn, const uint16_t dstGapIn, const uint16_t dstfracGapIn)
        : LoadData2dTransposeParams(startIndexIn, repeatTimesIn, srcStrideIn, dstGapIn, dstfracGapIn, 0)
    {}
    uint16_t startIndex = 0;
    uint8_t repeatTimes = 0;
    uint16_t srcStride = 0;
    uint16_t dstGap = 0;
    uint16_t dstFracGap = 0;
    uint8_t addrMode = 0;
};

struct MmadParams {
    __aicore__ MmadParams() {}
    __aicore__ MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const bool isBiasIn,
        const int32_t fmOffsetIn, const bool enSsparseIn, const bool enWinogradAIn, const bool enWinogradBIn)
        : m(mIn),
          n(nIn),
          k(kIn),
          isBias(isBiasIn),
          fmOffset(fmOffsetIn),
          enSsparse(enSsparseIn),
          enWinogradA(enWinogradAIn),
          enWinogradB(enWinogradBIn)
    {}
    __aicore__ MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const uint8_t unitFlagIn,
        const bool cmatrixSourceIn, const bool cmatrixInitValIn)
        : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn), cmatrixInitVal(cmatrixInitValIn)
    {}
    uint16_t m = 0;
    uint16_t n = 0;
    uint16_t k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false;
    bool enWinogradA = false;
    bool enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false;
    bool cmatrixSource = false;
    bool cmatrixInitVal = true;
#if CVTILE_ARCH35
    bool disableGemv = false;
#endif
};

enum class CO2Layout : uint8_t {
    NZ = 0,
    ROW_MAJOR,
    COLUMN_MAJOR
};

struct FixpipeConfig {
    CO2Layout format;
#if CVTILE_ARCH35
    bool isToUB;
#endif
    __aicore__ constexpr inline FixpipeConfig(CO2Layout format_)
        : format(format_)
#if CVTILE_ARCH35
          , isToUB(false)
#endif
    {}
    __aicore__ constexpr inline FixpipeConfig(CO2Layout format_, bool isToUB_)
        : format(format_)
#if CVTILE_ARCH35
          , isToUB(isToUB_)
#endif
    {
        (void)isToUB_;
    }
};
#if CVTILE_ARCH35
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ, false};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR, false};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR, false};
#else
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};
#endif

struct FixpipeParamsV220 {
    __aicore__ FixpipeParamsV220() {}
    __aicore__ FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
        const uint32_t dstStrideIn, const bool reluEnIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), reluEn(reluEnIn)
    {}
    __aicore__ FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
        const uint32_t dstStrideIn, const bool reluEnIn, const QuantMode_t quantPreIn, const int64_t deqScalarIn,
        const uint16_t ndNumIn, const uint16_t srcNdStrideIn, const uint16_t dstNdStrideIn, const uint8_t unitFlagIn)
        : nSize(nSizeIn),
          mSize(mSizeIn),
          srcStride(srcStrideIn),
          dstStride(dstStrideIn),
          quantPre(quantPreIn),
          deqScalar(static_cast<uint64_t>(deqScalarIn)),
          ndNum(ndNumIn),
          srcNdStride(srcNdStrideIn),
          dstNdStride(dstNdStrideIn),
          reluEn(reluEnIn),
          unitFlag(unitFlagIn)
    {}
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

struct Nz2NdParams {
#if CVTILE_ARCH35
    __aicore__ Nz2NdParams() {}
    __aicore__ Nz2NdParams(const uint16_t ndNumIn, const uint16_t srcNdStrideIn, const uint32_t dstNdStrideIn)
        : ndNum(ndNumIn), srcNdStride(srcNdStrideIn), dstNdStride(dstNdStrideIn)
    {}
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint32_t dstNdStride = 0;
#else
    __aicore__ Nz2NdParams() {}
    __aicore__ Nz2NdParams(const bool nz2ndEnIn, const uint16_t ndNumIn, const uint16_t srcNdStrideIn,
        const uint16_t dstNdStrideIn, const uint16_t originalNSizeIn)
        : nz2ndEn(nz2ndEnIn),
          ndNum(ndNumIn),
          srcNdStride(srcNdStrideIn),
          dstNdStride(dstNdStrideIn),
          originalNSize(originalNSizeIn)
    {}
    bool nz2ndEn = false;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    uint16_t originalNSize = 0;
#endif
};

struct Nz2DnParams {
    __aicore__ Nz2DnParams() {}
    __aicore__ Nz2DnParams(const uint16_t dnNumIn, const uint16_t srcNzMatrixStrideIn,
        const uint32_t dstDnMatrixStrideIn, const uint16_t srcNzC0StrideIn)
        : dnNum(dnNumIn),
          srcNzMatrixStride(srcNzMatrixStrideIn),
          dstDnMatrixStride(dstDnMatrixStrideIn),
          srcNzC0Stride(srcNzC0StrideIn)
    {}
    uint16_t dnNum = 1;
    uint16_t srcNzMatrixStride = 0;
    uint32_t dstDnMatrixStride = 0;
    uint16_t srcNzC0Stride = 0;
};

template <CO2Layout format>
struct TransformParams {};
template <>
struct TransformParams<CO2Layout::NZ> {
    __aicore__ inline TransformParams() {}
    using PARAMS = uint8_t;
};
template <>
struct TransformParams<CO2Layout::ROW_MAJOR> {
    __aicore__ inline TransformParams() {}
    using PARAMS = Nz2NdParams;
};
template <>
struct TransformParams<CO2Layout::COLUMN_MAJOR> {
    __aicore__ inline TransformParams() {}
    using PARAMS = Nz2DnParams;
};

template <CO2Layout format = CO2Layout::ROW_MAJOR>
struct FixpipeParamsArch3510 {
    __aicore__ FixpipeParamsArch3510() {}
    __aicore__ FixpipeParamsArch3510(
        const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn, const uint32_t dstStrideIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn)
    {}
    ReluMode preReluMode = ReluMode::NO_RELU;
    ClipReluMode preClipReluMode = ClipReluMode::NOCLIP_RELU;
    uint64_t reluScalar = 0;
    uint64_t vectorRelu = 0;
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    uint8_t dualDstCtl = 0;
    bool subBlockId = false;
    typename TransformParams<format>::PARAMS params;
    bool isChannelSplit = false;
};

template <CO2Layout format = CO2Layout::ROW_MAJOR>
struct FixpipeParamsC310 : FixpipeParamsArch3510<format> {
    __aicore__ FixpipeParamsC310() : FixpipeParamsArch3510<format>() {}
    __aicore__ FixpipeParamsC310(
        const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn, const uint32_t dstStrideIn)
        : FixpipeParamsArch3510<format>(nSizeIn, mSizeIn, srcStrideIn, dstStrideIn)
    {}
};

struct BinaryConfig {
    int8_t scalarTensorIndex = 1;
};
constexpr BinaryConfig DEFAULT_BINARY_CONFIG = {1};
struct BinaryDefaultType {};

struct BinaryRepeatParams {
    __aicore__ BinaryRepeatParams() {}
    __aicore__ BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn,
        const uint8_t src1BlkStrideIn, const uint8_t dstRepStrideIn, const uint8_t src0RepStrideIn,
        const uint8_t src1RepStrideIn)
        : dstBlkStride(dstBlkStrideIn),
          src0BlkStride(src0BlkStrideIn),
          src1BlkStride(src1BlkStrideIn),
          dstRepStride(dstRepStrideIn),
          src0RepStride(src0RepStrideIn),
          src1RepStride(src1RepStrideIn)
    {}
    uint32_t blockNumber = DEFAULT_BLK_NUM;
    uint8_t dstBlkStride = DEFAULT_BLK_STRIDE;
    uint8_t src0BlkStride = DEFAULT_BLK_STRIDE;
    uint8_t src1BlkStride = DEFAULT_BLK_STRIDE;
    uint8_t dstRepStride = DEFAULT_REPEAT_STRIDE;
    uint8_t src0RepStride = DEFAULT_REPEAT_STRIDE;
    uint8_t src1RepStride = DEFAULT_REPEAT_STRIDE;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
};

struct UnaryRepeatParams {
    __aicore__ UnaryRepeatParams() {}
    __aicore__ UnaryRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t srcBlkStrideIn,
        const uint8_t dstRepStrideIn, const uint8_t srcRepStrideIn)
        : dstBlkStride(dstBlkStrideIn), srcBlkStride(srcBlkStrideIn), dstRepStride(dstRepStrideIn),
          srcRepStride(srcRepStrideIn)
    {}
    __aicore__ UnaryRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t srcBlkStrideIn,
        const uint8_t dstRepStrideIn, const uint8_t srcRepStrideIn, const bool halfBlockIn)
        : dstBlkStride(dstBlkStrideIn), srcBlkStride(srcBlkStrideIn), dstRepStride(dstRepStrideIn),
          srcRepStride(srcRepStrideIn), halfBlock(halfBlockIn)
    {}
    uint32_t blockNumber = DEFAULT_BLK_NUM;
    uint16_t dstBlkStride = DEFAULT_BLK_STRIDE;
    uint16_t srcBlkStride = DEFAULT_BLK_STRIDE;
    uint8_t dstRepStride = DEFAULT_REPEAT_STRIDE;
    uint8_t srcRepStride = DEFAULT_REPEAT_STRIDE;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
    bool halfBlock = false;
};

struct BrcbRepeatParams {
    __aicore__ BrcbRepeatParams() {}
    __aicore__ BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn)
        : dstRepStride(dstRepStrideIn), dstBlkStride(dstBlkStrideIn)
    {}
    uint32_t blockNumber = DEFAULT_BLK_NUM;
    uint16_t dstRepStride = DEFAULT_REPEAT_STRIDE;
    uint16_t dstBlkStride = DEFAULT_BLK_STRIDE;
    uint8_t src0BlkStride = DEFAULT_BLK_STRIDE;
    uint8_t src1BlkStride = DEFAULT_BLK_STRIDE;
    uint8_t src0RepStride = DEFAULT_REPEAT_STRIDE;
    uint8_t src1RepStride = DEFAULT_REPEAT_STRIDE;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
};

// ---------------------------------------------------------------- tensors
template <typename T>
class LocalTensor {
public:
    using PrimType = T;
    __aicore__ inline LocalTensor() {}
    __aicore__ CVTILE_INL LocalTensor(TPosition pos, uint32_t addr, uint32_t tileSize);
    __aicore__ CVTILE_INL PrimType GetValue(const uint32_t offset) const;
    template <typename S>
    __aicore__ CVTILE_INL void SetValue(const uint32_t index, const S value) const;
    __aicore__ CVTILE_INL LocalTensor operator[](const uint32_t offset) const;
    template <typename U>
    __aicore__ CVTILE_INL LocalTensor<U> ReinterpretCast() const;
    __aicore__ CVTILE_INL PrimType* GetPhyAddr() const;
    __aicore__ CVTILE_INL PrimType* GetPhyAddr(const uint32_t offset) const;
    __aicore__ inline int32_t GetPosition() const { return static_cast<int32_t>(cvtPos_); }
    __aicore__ inline uint32_t GetSize() const { return cvtLen_ / static_cast<uint32_t>(sizeof(T)); }
    __aicore__ inline void SetSize(const uint32_t size) { cvtLen_ = size * static_cast<uint32_t>(sizeof(T)); }

    // project-private state used by the CPU twin (not Ascend C API)
    TPosition cvtPos_ = TPosition::MAX;
    uint32_t cvtAddr_ = 0; // byte address inside the physical space
    uint32_t cvtLen_ = 0;  // bytes
};

template <typename T>
class GlobalTensor {
public:
    using PrimType = T;
    __aicore__ inline GlobalTensor() {}
    __aicore__ CVTILE_INL void SetGlobalBuffer(__gm__ PrimType* buffer, uint64_t bufferSize);
    __aicore__ CVTILE_INL void SetGlobalBuffer(__gm__ PrimType* buffer);
    __aicore__ inline const __gm__ PrimType* GetPhyAddr() const { return cvtPtr_; }
    __aicore__ inline __gm__ PrimType* GetPhyAddr(const uint64_t offset) const { return cvtPtr_ + offset; }
    __aicore__ CVTILE_INL PrimType GetValue(const uint64_t offset) const;
    __aicore__ CVTILE_INL void SetValue(const uint64_t offset, PrimType value);
    __aicore__ inline uint64_t GetSize() const { return bufferSize_; }
    __aicore__ CVTILE_INL GlobalTensor operator[](const uint64_t offset) const;

    uint64_t bufferSize_ = 0; // element count (0 when SetGlobalBuffer had no size)
    // project-private state used by the CPU twin (not Ascend C API)
    __gm__ PrimType* cvtPtr_ = nullptr;
    const uint8_t* cvtRoot_ = nullptr; // buffer given to SetGlobalBuffer
    uint64_t cvtRootBytes_ = 0;        // its size in bytes (0: unknown)
};

template <TPosition pos = TPosition::LCM>
class TBuf {
public:
    __aicore__ inline TBuf() = default;
    template <typename T>
    __aicore__ CVTILE_INL LocalTensor<T> Get();
    template <typename T>
    __aicore__ CVTILE_INL LocalTensor<T> Get(uint32_t len);
    template <typename T>
    __aicore__ CVTILE_INL LocalTensor<T> GetWithOffset(uint32_t size, uint32_t bufOffset);

    // project-private state used by the CPU twin (not Ascend C API)
    uint32_t cvtAddr_ = 0;
    uint32_t cvtLen_ = 0;
    bool cvtInit_ = false;
};

class TPipe {
public:
    __aicore__ inline TPipe() {}
    __aicore__ inline ~TPipe() {}
    __aicore__ CVTILE_INL void Init();
    template <TPosition pos>
    __aicore__ CVTILE_INL bool InitBuffer(TBuf<pos>& buf, uint32_t len);
    __aicore__ CVTILE_INL void Reset();
    __aicore__ CVTILE_INL void Destroy();

    // project-private state used by the CPU twin (not Ascend C API): next free byte per space
    uint32_t cvtNext_[8] = {0, 0, 0, 0, 0, 0, 0, 0};
};

// ---------------------------------------------------------------- system variables
__aicore__ CVTILE_INL int64_t GetBlockNum();
__aicore__ CVTILE_INL int64_t GetBlockIdx();
__aicore__ CVTILE_INL int64_t GetSubBlockIdx();
__aicore__ CVTILE_INL int64_t GetSubBlockNum();
__aicore__ CVTILE_INL int64_t GetTaskRatio();
__aicore__ CVTILE_INL int64_t GetTaskRation();
__aicore__ inline constexpr int16_t GetDataBlockSizeInBytes() { return ONE_BLK_SIZE; }

// ---------------------------------------------------------------- synchronisation
template <HardEvent event>
__aicore__ CVTILE_INL void SetFlag(int32_t eventID);
template <HardEvent event>
__aicore__ CVTILE_INL void WaitFlag(int32_t eventID);
template <pipe_t pipe>
__aicore__ CVTILE_INL void PipeBarrier();
template <uint8_t modeId, pipe_t pipe>
__aicore__ CVTILE_INL void CrossCoreSetFlag(uint16_t flagId);
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
__aicore__ CVTILE_INL void CrossCoreWaitFlag(uint16_t flagId);

// ---------------------------------------------------------------- data movement
// GM <-> UB / L1 contiguous, count in elements
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count);
// block form, blockLen and gaps in 32-byte units
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
// GM -> L1 with ND to NZ conversion
#if CVTILE_ARCH35
template <typename T, bool enableSmallC0 = false>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& intriParams);
#else
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& intriParams);
#endif

// unaligned copies (blockLen in bytes)
#if CVTILE_ARCH35
template <typename T, PaddingMode mode = PaddingMode::Normal>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value) DataCopyPad(const LocalTensor<T>& dst,
    const GlobalTensor<T>& src, const DataCopyExtParams& dataCopyParams, const DataCopyPadExtParams<T>& padParams);
template <typename T, PaddingMode mode = PaddingMode::Normal>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& dataCopyParams);
template <typename T, PaddingMode mode = PaddingMode::Normal>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value) DataCopyPad(const LocalTensor<T>& dst,
    const GlobalTensor<T>& src, const DataCopyParams& dataCopyParams, const DataCopyPadParams& padParams);
template <typename T, PaddingMode mode = PaddingMode::Normal>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& dataCopyParams);
#else
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value) DataCopyPad(const LocalTensor<T>& dst,
    const GlobalTensor<T>& src, const DataCopyExtParams& dataCopyParams, const DataCopyPadExtParams<T>& padParams);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& dataCopyParams);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value) DataCopyPad(const LocalTensor<T>& dst,
    const GlobalTensor<T>& src, const DataCopyParams& dataCopyParams, const DataCopyPadParams& padParams);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCopyT<T>::value)
    DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& dataCopyParams);
#endif

// ---------------------------------------------------------------- cube
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& loadDataParams);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    LoadDataWithTranspose(const LocalTensor<T>& dst, const LocalTensor<T>& src,
        const LoadData2dTransposeParams& loadDataParams);
#if !CVTILE_ARCH35
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsLoadT<T>::value)
    LoadData(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const LoadData2DParams& loadDataParams);
#endif

template <typename T, typename U, typename S>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::MmadOk<T, U, S>::value) Mmad(const LocalTensor<T>& dst,
    const LocalTensor<U>& fm, const LocalTensor<S>& filter, const MmadParams& mmadParams);

// L0C -> GM / L1 (and UB on 3510) with the V220 parameter block
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value)
    Fixpipe(const LocalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams);
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value)
    Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams);
#if CVTILE_ARCH35
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value) Fixpipe(const LocalTensor<T>& dst,
    const LocalTensor<U>& src, const FixpipeParamsArch3510<config.format>& intriParams);
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::FixpipeOk<T, U>::value) Fixpipe(const GlobalTensor<T>& dst,
    const LocalTensor<U>& src, const FixpipeParamsArch3510<config.format>& intriParams);
#endif

// ---------------------------------------------------------------- vector: unary
#if CVTILE_ARCH35
template <typename T, const ExpConfig& config = DEFAULT_EXP_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Exp(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T, const LnConfig& config = DEFAULT_LN_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Ln(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T, const SqrtConfig& config = DEFAULT_SQRT_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Sqrt(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T, const RsqrtConfig& config = DEFAULT_RSQRT_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Rsqrt(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T, const ReciprocalConfig& config = DEFAULT_RECIPROCAL_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Reciprocal(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
#else
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Exp(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Ln(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Sqrt(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Rsqrt(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)
    Reciprocal(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
#endif
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecAbs<T>::value)
    Abs(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsRelu<T>::value)
    Relu(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);

// ---------------------------------------------------------------- vector: math library (count forms)
// The advanced API's elementwise functions in the form without a temporary buffer (half / float; calCount
// elements). The 950 headers add a trailing config template parameter with a default to Tanh/Erf; calls that
// deduce T compile against either (arch 2201 and 3510 as the asc-devkit headers read list for Tanh, Sigmoid,
// Floor and Power; Erf assumed the same).
#define CVTILE_DECL_MATH1(NAME)                                                                                      \
    template <typename T, bool isReuseSource = false>                                                                \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value)                                               \
        NAME(const LocalTensor<T>& dstTensor, const LocalTensor<T>& srcTensor, const uint32_t calCount);
CVTILE_DECL_MATH1(Tanh)
CVTILE_DECL_MATH1(Erf)
CVTILE_DECL_MATH1(Floor)
CVTILE_DECL_MATH1(Sigmoid)
#undef CVTILE_DECL_MATH1
template <typename T, bool isReuseSource = false>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value) Power(const LocalTensor<T>& dstTensor,
    const LocalTensor<T>& src0Tensor, const LocalTensor<T>& src1Tensor, uint32_t calCount);
template <typename T, bool isReuseSource = false>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value) Power(const LocalTensor<T>& dstTensor,
    const LocalTensor<T>& src0Tensor, const T& src1Scalar, uint32_t calCount);
template <typename T, bool isReuseSource = false>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecFloat<T>::value) Power(const LocalTensor<T>& dstTensor,
    const T& src0Scalar, const LocalTensor<T>& src1Tensor, uint32_t calCount);

// ---------------------------------------------------------------- vector: binary
#define CVTILE_DECL_BINARY(NAME, TRAIT)                                                                              \
    template <typename T>                                                                                            \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::TRAIT<T>::value) NAME(const LocalTensor<T>& dst,                    \
        const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);                               \
    template <typename T, bool isSetMask = true>                                                                     \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::TRAIT<T>::value) NAME(const LocalTensor<T>& dst,                    \
        const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask, const uint8_t repeatTime,             \
        const BinaryRepeatParams& repeatParams);                                                                     \
    template <typename T, bool isSetMask = true>                                                                     \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::TRAIT<T>::value) NAME(const LocalTensor<T>& dst,                    \
        const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask[], const uint8_t repeatTime,           \
        const BinaryRepeatParams& repeatParams);
CVTILE_DECL_BINARY(Add, IsVecArith)
CVTILE_DECL_BINARY(Sub, IsVecArith)
CVTILE_DECL_BINARY(Mul, IsVecMul)
CVTILE_DECL_BINARY(Max, IsVecArith)
CVTILE_DECL_BINARY(Min, IsVecArith)
#undef CVTILE_DECL_BINARY
#if CVTILE_ARCH35
template <typename T, const DivConfig& config = DEFAULT_DIV_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(
    const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
template <typename T, bool isSetMask = true, const DivConfig& config = DEFAULT_DIV_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst,
    const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask, const uint8_t repeatTime,
    const BinaryRepeatParams& repeatParams);
template <typename T, bool isSetMask = true, const DivConfig& config = DEFAULT_DIV_CONFIG>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst,
    const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask[], const uint8_t repeatTime,
    const BinaryRepeatParams& repeatParams);
#else
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(
    const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst,
    const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask, const uint8_t repeatTime,
    const BinaryRepeatParams& repeatParams);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecDiv<T>::value) Div(const LocalTensor<T>& dst,
    const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask[], const uint8_t repeatTime,
    const BinaryRepeatParams& repeatParams);
#endif

// ---------------------------------------------------------------- vector: bitwise
// And / Or (basic_api/kernel_operator_vec_binary_intf.h) and Not (kernel_operator_vec_unary_intf.h).
#define CVTILE_DECL_BITWISE(NAME)                                                                                    \
    template <typename T>                                                                                            \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsBitCnt<T>::value) NAME(const LocalTensor<T>& dst,                 \
        const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);                               \
    template <typename T, bool isSetMask = true>                                                                     \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsBitRep<T>::value) NAME(const LocalTensor<T>& dst,                 \
        const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask[], const uint8_t repeatTime,           \
        const BinaryRepeatParams& repeatParams);                                                                     \
    template <typename T, bool isSetMask = true>                                                                     \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsBitRep<T>::value) NAME(const LocalTensor<T>& dst,                 \
        const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask, const uint8_t repeatTime,             \
        const BinaryRepeatParams& repeatParams);
CVTILE_DECL_BITWISE(And)
CVTILE_DECL_BITWISE(Or)
#undef CVTILE_DECL_BITWISE
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsNotCnt<T>::value)
    Not(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsNotRep<T>::value) Not(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, uint64_t mask[], const uint8_t repeatTime, const UnaryRepeatParams& repeatParams);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsNotRep<T>::value) Not(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, uint64_t mask, const uint8_t repeatTime, const UnaryRepeatParams& repeatParams);

// ---------------------------------------------------------------- vector: tensor-scalar
#define CVTILE_DECL_SCALAR(NAME)                                                                                     \
    template <typename T, bool isSetMask = true>                                                                     \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecScalar<T>::value)                                              \
        NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count);      \
    template <typename T, bool isSetMask = true>                                                                     \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecScalar<T>::value) NAME(const LocalTensor<T>& dst,              \
        const LocalTensor<T>& src, const T& scalarValue, uint64_t mask, const uint8_t repeatTime,                    \
        const UnaryRepeatParams& repeatParams);                                                                      \
    template <typename T, bool isSetMask = true>                                                                     \
    __aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsVecScalar<T>::value) NAME(const LocalTensor<T>& dst,              \
        const LocalTensor<T>& src, const T& scalarValue, uint64_t mask[], const uint8_t repeatTime,                  \
        const UnaryRepeatParams& repeatParams);
CVTILE_DECL_SCALAR(Adds)
CVTILE_DECL_SCALAR(Muls)
CVTILE_DECL_SCALAR(Maxs)
CVTILE_DECL_SCALAR(Mins)
#undef CVTILE_DECL_SCALAR

template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsDup<T>::value)
    Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsDup<T>::value) Duplicate(const LocalTensor<T>& dst,
    const T& scalarValue, uint64_t mask, const uint8_t repeatTime, const uint16_t dstBlockStride,
    const uint8_t dstRepeatStride);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsDup<T>::value) Duplicate(const LocalTensor<T>& dst,
    const T& scalarValue, uint64_t mask[], const uint8_t repeatTime, const uint16_t dstBlockStride,
    const uint8_t dstRepeatStride);

// ---------------------------------------------------------------- compare / select
template <typename T, typename U>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCmp<T>::value && cvtile_api::IsMaskT<U>::value) Compare(
    const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode, uint32_t count);
template <typename T, typename U>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCmp<T>::value && cvtile_api::IsMaskT<U>::value) Compares(
    const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode, uint32_t count);
template <typename T, typename U>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsCmp<T>::value && cvtile_api::IsMaskT<U>::value) CompareScalar(
    const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode, uint32_t count);
template <typename T, typename U>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsSel<T>::value && cvtile_api::IsSelMaskT<U>::value)
    Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
        const LocalTensor<T>& src1, SELMODE selMode, uint32_t count);
template <typename T, typename U>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsSel<T>::value && cvtile_api::IsSelMaskT<U>::value)
    Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0, T src1,
        SELMODE selMode, uint32_t count);

// ---------------------------------------------------------------- cast
template <typename T, typename U>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::CastOk<T, U>::value)
    Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint32_t count);
template <typename T, typename U, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::CastOk<T, U>::value) Cast(const LocalTensor<T>& dst,
    const LocalTensor<U>& src, const RoundMode& roundMode, const uint64_t mask, const uint8_t repeatTime,
    const UnaryRepeatParams& repeatParams);

// ---------------------------------------------------------------- reductions
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsReduce<T>::value) ReduceMax(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex = 0);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsReduce<T>::value) ReduceMin(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex = 0);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsReduce<T>::value) ReduceSum(
    const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer, const int32_t count);

// per-repeat reductions: legacy names (CANN 8.x headers) ...
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsReduce<T>::value) WholeReduceMax(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, const int32_t mask, const int32_t repeatTime, const int32_t dstRepStride,
    const int32_t srcBlkStride, const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsReduce<T>::value) WholeReduceMin(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, const int32_t mask, const int32_t repeatTime, const int32_t dstRepStride,
    const int32_t srcBlkStride, const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX);
template <typename T, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsReduce<T>::value) WholeReduceSum(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, const int32_t mask, const int32_t repeatTime, const int32_t dstRepStride,
    const int32_t srcBlkStride, const int32_t srcRepStride);
// ... and the current name
template <ReduceType reduceType, typename T, typename U, bool isSetMask = true>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsReduce<T>::value && std::is_same<T, U>::value)
    ReduceRepeat(const LocalTensor<T>& dst, const LocalTensor<U>& src, const int32_t mask, const int32_t repeatTime,
        const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
        ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX);

// ---------------------------------------------------------------- broadcast
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsBrcb<T>::value) Brcb(const LocalTensor<T>& dst,
    const LocalTensor<T>& src, const uint8_t repeatTime, const BrcbRepeatParams& repeatParams);

// ---------------------------------------------------------------- arithmetic progression
// adv_api/index/arithprogression.h: Arange is the documented name; ArithProgression (same signature) is
// defined next to it by the implementation headers and is what older code and TopK call.
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsArithProg<T>::value) ArithProgression(
    const LocalTensor<T>& dst, const T firstValue, const T diffValue, const int32_t count);
template <typename T>
__aicore__ CVTILE_INL CVT_ENABLE(cvtile_api::IsArithProg<T>::value)
    Arange(const LocalTensor<T>& dst, const T firstValue, const T diffValue, const int32_t count);
} // namespace AscendC

#endif // CVTILE_DECL_KERNEL_OPERATOR_H
