#pragma once
// exp in Eigen's float packets (16 floats on AVX-512, 8 on AVX2) for arguments ≤ 0: softmax's
// rows and cross-entropy (norm.cpp, losses.cpp), GELU's density (elementwise.cpp).
#include <Eigen/Core>

#include <cstdint>

#if defined(EIGEN_VECTORIZE_AVX)
namespace rl::cpu::packet_exp {

namespace ei = Eigen::internal;
using Packet = ei::packet_traits<float>::type;
constexpr int64_t kLanes = ei::packet_traits<float>::size;

// exp(a) for a ≤ 0 (a row's elements less its maximum; GELU's -x²/2), 0 where
// a < log(FLT_MIN), NaN where a is NaN. Below log(FLT_MIN) float's exp is a denormal at best;
// Eigen's packet exp returned 2.9e-39 there, -inf included (AVX2): a masked key (-inf) got a
// denormal weight instead of PyTorch's 0.
//
// a = n·ln2 + r with n = round(a / ln2), |r| ≤ ln2/2 (W. J. Cody and W. Waite, Software Manual
// for the Elementary Functions, 1980: ln2 in two parts, Cephes's constants);
// exp(r) = 1 + r + r²·q(r), q of degree 4 fitted by us for relative error; 2^n built in the
// exponent field. a ≤ 0 keeps n in [-126, 0], so 2^n is a normal float and no clamp is needed.
// Within 4·2^-24 of float64 over [log(FLT_MIN), 0]
// (OpForward.SoftmaxExpAgainstFloat64OverItsWholeRange). 16 vector operations against Eigen's
// pexp's ~30 (a general argument: clamps, a floor, ldexp in two factors): softmax's forward and
// cross-entropy ran on the exp, at 0.19–0.40 of their memory roofline (bench_roofline, 2026-12-07).
#if defined(EIGEN_VECTORIZE_AVX2)
// The int packet of Packet's width (Eigen 3.4's packet_traits<int> stays at 8 lanes on AVX-512).
#if defined(EIGEN_VECTORIZE_AVX512)
using PacketI = ei::Packet16i;
#else
using PacketI = ei::Packet8i;
#endif

inline Packet exp_or_zero(const Packet& a) {
    using P = Packet;
    const P magic = ei::pset1<P>(12582912.0f);  // 1.5·2^23: adding it rounds to an integer
    const P t = ei::pmadd(a, ei::pset1<P>(1.44269504088896341f), magic);
    const P n = ei::psub(t, magic);
    P r = ei::pmadd(n, ei::pset1<P>(-0.693359375f), a);
    r = ei::pmadd(n, ei::pset1<P>(2.12194440e-4f), r);
    P q = ei::pset1<P>(1.381451354e-03f);
    q = ei::pmadd(q, r, ei::pset1<P>(8.368685877e-03f));
    q = ei::pmadd(q, r, ei::pset1<P>(4.166838703e-02f));
    q = ei::pmadd(q, r, ei::pset1<P>(1.666652089e-01f));
    q = ei::pmadd(q, r, ei::pset1<P>(4.999999346e-01f));
    const P e_r = ei::padd(ei::pmadd(ei::pmul(r, r), q, r), ei::pset1<P>(1.0f));
    // t's low mantissa bits hold n + 0x400000: the exponent field of 2^n is n + 127.
    const PacketI bits =
        ei::padd(ei::preinterpret<PacketI>(t), ei::pset1<PacketI>(127 - 0x4B400000));
    const P two_n = ei::preinterpret<P>(ei::plogical_shift_left<23>(bits));
    return ei::pandnot(ei::pmul(e_r, two_n), ei::pcmp_lt(a, ei::pset1<P>(-87.33654475f)));
}
#else
inline Packet exp_or_zero(const Packet& a) {
    const Packet lo = ei::pset1<Packet>(-87.33654475f);
    return ei::pandnot(ei::pexp(a), ei::pcmp_lt(a, lo));
}
#endif

}  // namespace rl::cpu::packet_exp
#endif
