// cvtile CPU twin: number formats and the vector unit's elementary functions.
// Included by twin/kernel_operator.h after the declaration header. Written for cvtile.
#ifndef CVTILE_TWIN_NUMERIC_H
#define CVTILE_TWIN_NUMERIC_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#define CVTILE_NOFMA __attribute__((optimize("fp-contract=off")))

namespace cvtile_twin {

enum class Rnd { RINT, FLOOR, CEIL, ROUND, TRUNC, ODD };

inline float BitsToF32(uint32_t b)
{
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
inline uint32_t F32ToBits(float f)
{
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// Round x to a binary float format with EB exponent bits and MB stored mantissa bits, in one rounding
// step with mode `m`; returns the encoding. Subnormals are kept, NaN gives the quiet NaN of the sign,
// overflow gives inf (RINT, ROUND, and FLOOR/CEIL towards the overflow side) or the largest finite value.
template <int EB, int MB>
inline uint32_t RoundToBits(long double x, Rnd m)
{
    const uint32_t signBit = 1u << (EB + MB);
    const int bias = (1 << (EB - 1)) - 1;
    const int emin = 1 - bias;
    const int emax = bias;
    const uint32_t expMask = ((1u << EB) - 1u) << MB;
    const bool neg = std::signbit(x);
    const uint32_t s = neg ? signBit : 0u;
    if (std::isnan(x)) {
        return s | expMask | (1u << (MB - 1));
    }
    long double a = std::fabs(x);
    if (std::isinf(a)) {
        return s | expMask;
    }
    if (a == 0.0L) {
        return s;
    }
    int e = 0;
    (void)std::frexp(a, &e);
    e -= 1; // a in [2^e, 2^(e+1))
    const int qexp = (e < emin ? emin : e) - MB;
    const long double scaled = std::ldexp(a, -qexp);
    long double n = std::floor(scaled);
    const long double frac = scaled - n;
    const bool odd = std::fmod(n, 2.0L) != 0.0L;
    bool inc = false;
    switch (m) {
        case Rnd::RINT: inc = frac > 0.5L || (frac == 0.5L && odd); break;
        case Rnd::ROUND: inc = frac >= 0.5L; break;
        case Rnd::TRUNC: inc = false; break;
        case Rnd::FLOOR: inc = neg && frac > 0.0L; break;
        case Rnd::CEIL: inc = !neg && frac > 0.0L; break;
        case Rnd::ODD: inc = frac > 0.0L && !odd; break;
    }
    if (inc) {
        n += 1.0L;
    }
    uint64_t ni = static_cast<uint64_t>(n);
    int ex = qexp + MB;
    if (ni >= (1ull << (MB + 1))) {
        ni >>= 1;
        ex += 1;
    }
    if (ni == 0) {
        return s;
    }
    if (ni < (1ull << MB)) {
        return s | static_cast<uint32_t>(ni);
    }
    if (ex > emax) {
        const bool toInf = (m == Rnd::RINT) || (m == Rnd::ROUND) || (m == Rnd::FLOOR && neg) ||
                           (m == Rnd::CEIL && !neg);
        return toInf ? (s | expMask) : (s | (expMask - (1u << MB)) | ((1u << MB) - 1u));
    }
    return s | (static_cast<uint32_t>(ex + bias) << MB) | (static_cast<uint32_t>(ni) - (1u << MB));
}

inline float F16BitsToF32(uint16_t h)
{
    const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu;
    const uint32_t mant = h & 0x3FFu;
    if (e == 0x1Fu) {
        return BitsToF32(sign | 0x7F800000u | (mant << 13));
    }
    if (e == 0) {
        const float v = std::ldexp(static_cast<float>(mant), -24);
        return sign ? -v : v;
    }
    return BitsToF32(sign | ((e + 112u) << 23) | (mant << 13));
}
inline uint16_t F32ToF16Bits(float f, Rnd m = Rnd::RINT)
{
    if (std::isnan(f)) {
        return static_cast<uint16_t>(((F32ToBits(f) >> 16) & 0x8000u) | 0x7E00u);
    }
    return static_cast<uint16_t>(RoundToBits<5, 10>(static_cast<long double>(f), m));
}
inline float Bf16BitsToF32(uint16_t b) { return BitsToF32(static_cast<uint32_t>(b) << 16); }
inline uint16_t F32ToBf16Bits(float f, Rnd m = Rnd::RINT)
{
    if (std::isnan(f)) {
        return static_cast<uint16_t>((F32ToBits(f) >> 16) | 0x0040u);
    }
    return static_cast<uint16_t>(RoundToBits<8, 7>(static_cast<long double>(f), m));
}
inline float LdToF32(long double v, Rnd m) { return BitsToF32(RoundToBits<8, 23>(v, m)); }

// long double -> integer with rounding mode and saturation to [lo, hi]; NaN gives 0.
inline int64_t LdToInt(long double v, Rnd m, long double lo, long double hi)
{
    if (std::isnan(v)) {
        return 0;
    }
    long double r = v;
    if (std::isfinite(v)) {
        const long double fl = std::floor(v);
        const long double frac = v - fl;
        switch (m) {
            case Rnd::RINT:
                r = (frac > 0.5L || (frac == 0.5L && std::fmod(fl, 2.0L) != 0.0L)) ? fl + 1.0L : fl;
                break;
            case Rnd::ROUND: r = (v < 0) ? -std::floor(-v + 0.5L) : std::floor(v + 0.5L); break;
            case Rnd::TRUNC: r = std::trunc(v); break;
            case Rnd::FLOOR: r = fl; break;
            case Rnd::CEIL: r = std::ceil(v); break;
            case Rnd::ODD: r = (frac == 0.0L) ? fl : (std::fmod(fl, 2.0L) != 0.0L ? fl : fl + 1.0L); break;
        }
    }
    if (r < lo) {
        r = lo;
    }
    if (r > hi) {
        r = hi;
    }
    return static_cast<int64_t>(r);
}

// Round a float to an integral float value (Cast float -> float).
inline float F32RoundIntegral(float v, Rnd m)
{
    if (!std::isfinite(v) || std::fabs(v) >= 8388608.0f) {
        return v;
    }
    const long double r = static_cast<long double>(
        LdToInt(static_cast<long double>(v), m, -std::numeric_limits<long double>::max(),
            std::numeric_limits<long double>::max()));
    const float out = static_cast<float>(r);
    return (out == 0.0f && std::signbit(v)) ? -0.0f : out;
}

// The vector unit's float exp (the cvtile simulator's algorithm, bit for bit; no FMA).
CVTILE_NOFMA inline float VecExp(float x)
{
    const float lo = -87.33654f;
    const float hi = 88.72283f;
    if (x != x) {
        return x;
    }
    float xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    const float n = std::floor(xc * 1.4426950408889634f + 0.5f);
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t ni = static_cast<int32_t>(n);
    const int32_t n1 = ni >> 1;
    const float s1 = BitsToF32(static_cast<uint32_t>(n1 + 127) << 23);
    const float s2 = BitsToF32(static_cast<uint32_t>(ni - n1 + 127) << 23);
    float y = (p * s1) * s2;
    if (x < lo) {
        y = 0.0f;
    }
    if (x > hi) {
        y = std::numeric_limits<float>::infinity();
    }
    return y;
}
CVTILE_NOFMA inline float VecLn(float x)
{
    if (x != x) {
        return x;
    }
    if (x > 0.0f) {
        return static_cast<float>(std::log(static_cast<double>(x)));
    }
    if (x == 0.0f) {
        return -std::numeric_limits<float>::infinity();
    }
    return std::numeric_limits<float>::quiet_NaN();
}
CVTILE_NOFMA inline float VecSqrt(float x) { return std::sqrt(x); }
CVTILE_NOFMA inline float VecRsqrt(float x) { return 1.0f / std::sqrt(x); }
CVTILE_NOFMA inline float VecRec(float x) { return 1.0f / x; }
inline float VecMax(float a, float b) { return (a > b || a != a) ? a : b; }
inline float VecMin(float a, float b) { return (a < b || a != a) ? a : b; }
inline float VecRelu(float a) { return a > 0.0f ? a : a * 0.0f; }
// The math library's functions as the cvtile simulator computes them (sim/rt.py, bit for bit): the double libm
// function of the exact float value rounded once to float; sigmoid is its formula on the vector exp in float.
inline float VecTanh(float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); }
inline float VecErf(float x) { return static_cast<float>(std::erf(static_cast<double>(x))); }
inline float VecFloor(float x) { return static_cast<float>(std::floor(static_cast<double>(x))); }
inline float VecPow(float x, float y) { return static_cast<float>(std::pow(static_cast<double>(x), static_cast<double>(y))); }
CVTILE_NOFMA inline float VecSigmoid(float x) { return 1.0f / (1.0f + VecExp(-x)); }

} // namespace cvtile_twin

// ---------------------------------------------------------------- half / bfloat16_t definitions
inline half::half(const float& fVal) : val(cvtile_twin::F32ToF16Bits(fVal)) {}
inline half::half(const double& dVal)
    : val(std::isnan(dVal) ? static_cast<uint16_t>(std::signbit(dVal) ? 0xFE00u : 0x7E00u)
                           : static_cast<uint16_t>(cvtile_twin::RoundToBits<5, 10>(static_cast<long double>(dVal),
                                 cvtile_twin::Rnd::RINT)))
{}
inline half::half(const int8_t& iVal) : half(static_cast<float>(iVal)) {}
inline half::half(const uint8_t& iVal) : half(static_cast<float>(iVal)) {}
inline half::half(const int16_t& iVal) : half(static_cast<float>(iVal)) {}
inline half::half(const uint16_t& iVal) : half(static_cast<float>(iVal)) {}
inline half::half(const int32_t& iVal)
    : val(static_cast<uint16_t>(cvtile_twin::RoundToBits<5, 10>(static_cast<long double>(iVal), cvtile_twin::Rnd::RINT)))
{}
inline half::half(const uint32_t& iVal)
    : val(static_cast<uint16_t>(cvtile_twin::RoundToBits<5, 10>(static_cast<long double>(iVal), cvtile_twin::Rnd::RINT)))
{}
inline half::operator float() const { return cvtile_twin::F16BitsToF32(val); }
inline half::operator double() const { return static_cast<double>(cvtile_twin::F16BitsToF32(val)); }
inline half half::operator+(const half fp) const { return half(static_cast<float>(*this) + static_cast<float>(fp)); }
inline half half::operator-() const
{
    half r;
    r.val = static_cast<uint16_t>(val ^ 0x8000u);
    return r;
}
inline half half::operator-(const half fp) const { return half(static_cast<float>(*this) - static_cast<float>(fp)); }
inline half half::operator*(const half fp) const { return half(static_cast<float>(*this) * static_cast<float>(fp)); }
inline half half::operator/(const half fp) const { return half(static_cast<float>(*this) / static_cast<float>(fp)); }
inline half half::operator+=(const half fp) { return *this = *this + fp; }
inline half half::operator-=(const half fp) { return *this = *this - fp; }
inline half half::operator*=(const half fp) { return *this = *this * fp; }
inline half half::operator/=(const half fp) { return *this = *this / fp; }
inline bool half::operator==(const half& fp) const { return static_cast<float>(*this) == static_cast<float>(fp); }
inline bool half::operator!=(const half& fp) const { return static_cast<float>(*this) != static_cast<float>(fp); }
inline bool half::operator>(const half& fp) const { return static_cast<float>(*this) > static_cast<float>(fp); }
inline bool half::operator>=(const half& fp) const { return static_cast<float>(*this) >= static_cast<float>(fp); }
inline bool half::operator<(const half& fp) const { return static_cast<float>(*this) < static_cast<float>(fp); }
inline bool half::operator<=(const half& fp) const { return static_cast<float>(*this) <= static_cast<float>(fp); }

namespace bfloat16 {
inline Bf16T::Bf16T(const float& fVal) : val(cvtile_twin::F32ToBf16Bits(fVal)) {}
inline Bf16T Bf16T::operator+(const Bf16T fp) const { return Bf16T(ToFloat() + fp.ToFloat()); }
inline Bf16T Bf16T::operator-() const
{
    Bf16T r;
    r.val = static_cast<uint16_t>(val ^ 0x8000u);
    return r;
}
inline Bf16T Bf16T::operator-(const Bf16T fp) const { return Bf16T(ToFloat() - fp.ToFloat()); }
inline Bf16T::operator float() const { return cvtile_twin::Bf16BitsToF32(val); }
inline float Bf16T::ToFloat() const { return cvtile_twin::Bf16BitsToF32(val); }
} // namespace bfloat16

#endif // CVTILE_TWIN_NUMERIC_H
