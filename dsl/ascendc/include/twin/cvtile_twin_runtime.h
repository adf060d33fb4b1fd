// cvtile CPU twin: cores, on-chip memories, synchronisation, launcher and error reporting.
// Included by twin/kernel_operator.h after the declaration header. Written for cvtile.
#ifndef CVTILE_TWIN_RUNTIME_H
#define CVTILE_TWIN_RUNTIME_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cvtile_twin {

constexpr int kExitApiError = 3;
constexpr int kExitDeadlock = 4;
constexpr int kSpaces = 8; // indexed by AscendC::Hardware

using HW = AscendC::Hardware;
inline int HwIdx(HW h) { return static_cast<int>(h); }

inline const char* HwName(HW h)
{
    switch (h) {
        case HW::GM: return "GM";
        case HW::UB: return "UB";
        case HW::L1: return "L1";
        case HW::L0A: return "L0A";
        case HW::L0B: return "L0B";
        case HW::L0C: return "L0C";
        case HW::BIAS: return "BT";
        case HW::FIXBUF: return "FB";
        default: return "?";
    }
}

inline HW PosToHw(AscendC::TPosition p)
{
    using P = AscendC::TPosition;
    switch (p) {
        case P::GM: return HW::GM;
        case P::A1:
        case P::B1:
        case P::C1:
        case P::TSCM: return HW::L1;
        case P::A2: return HW::L0A;
        case P::B2: return HW::L0B;
        case P::CO1: return HW::L0C;
        case P::C2: return HW::BIAS;
        case P::VECIN:
        case P::VECOUT:
        case P::VECCALC: return HW::UB;
        case P::C2PIPE2GM: return HW::FIXBUF;
        default: return HW::MAX;
    }
}

inline const char* PosName(AscendC::TPosition p)
{
    static const char* n[] = {"GM", "A1", "A2", "B1", "B2", "C1", "C2", "CO1", "CO2", "VECIN", "VECOUT", "VECCALC",
        "SPM", "TSCM", "C2PIPE2GM", "C2PIPE2LOCAL", "MAX"};
    const unsigned i = static_cast<unsigned>(p);
    return i < sizeof(n) / sizeof(n[0]) ? n[i] : "?";
}

// ---------------------------------------------------------------- configuration
struct Config {
    int arch = CVTILE_ARCH35 ? 35 : 22;
    uint32_t cap[kSpaces] = {0, 0, 0, 0, 0, 0, 0, 0};
    bool serial = false;
    double timeoutSec = 20.0;
    bool poison = false;
    bool lenient = false;
    Config()
    {
        if (arch == 35) {
            const uint32_t c[kSpaces] = {0, 253952, 524288, 65536, 65536, 262144, 1024, 2048};
            std::memcpy(cap, c, sizeof(cap));
        } else {
            const uint32_t c[kSpaces] = {0, 196608, 524288, 65536, 65536, 131072, 1024, 7168};
            std::memcpy(cap, c, sizeof(cap));
        }
        if (const char* e = std::getenv("CVTILE_TWIN_TIMEOUT")) {
            timeoutSec = std::atof(e);
        }
        if (const char* e = std::getenv("CVTILE_TWIN_SERIAL")) {
            serial = e[0] != '\0' && e[0] != '0';
        }
        if (const char* e = std::getenv("CVTILE_TWIN_POISON")) {
            poison = e[0] != '\0' && e[0] != '0';
        }
        if (const char* e = std::getenv("CVTILE_TWIN_LENIENT")) {
            lenient = e[0] != '\0' && e[0] != '0';
        }
    }
};
inline Config& Cfg()
{
    static Config c;
    return c;
}

// ---------------------------------------------------------------- cores
enum class Kind { AIC, AIV };

struct Core {
    Kind kind = Kind::AIV;
    int group = 0;       // AI Core group (AIC + its AIVs); AIV-only / AIC-only: the core itself
    int sub = 0;         // AIV sub-block 0/1 inside the group (0 for AIC)
    int index = 0;       // index among cores of its kind
    int64_t blockIdx = 0;
    std::vector<uint8_t> mem[kSpaces];
    bool evt[static_cast<int>(AscendC::HardEvent::MAX)][8] = {};
    // cross-core flag counters (modes 0/1/2 share one set per core; mode 4 has its own)
    uint8_t counter[16] = {};
    uint8_t counter4[32] = {};
    uint8_t pend0[16] = {};
    uint8_t pend1[16] = {};
    uint8_t pend2[16] = {};
    // watchdog state (guarded by Launch::mu)
    bool live = true;
    bool blocked = false;
    int waitMode = -1;
    int waitId = -1;
    const uint8_t* waitCounter = nullptr;
    std::string Name() const
    {
        char b[64];
        if (kind == Kind::AIC) {
            std::snprintf(b, sizeof(b), "AIC %d (block %lld)", index, static_cast<long long>(blockIdx));
        } else {
            std::snprintf(b, sizeof(b), "AIV %d (block %lld, group %d, sub %d)", index,
                static_cast<long long>(blockIdx), group, sub);
        }
        return b;
    }
};

struct Launch {
    KernelMetaType type = KERNEL_TYPE_MAX;
    uint32_t blockDim = 0;
    int aivPerGroup = 0; // 0, 1 or 2
    bool hasAic = false;
    std::vector<std::unique_ptr<Core>> cores;
    std::vector<Core*> aic;               // by group
    std::vector<std::vector<Core*>> aiv;  // by group, sub
    std::vector<Core*> allAic, allAiv;
    std::mutex mu;
    std::condition_variable cv;
    bool mixed() const { return type == KERNEL_TYPE_MIX_AIC_1_1 || type == KERNEL_TYPE_MIX_AIC_1_2; }
};

inline Launch*& CurLaunch()
{
    static Launch* l = nullptr;
    return l;
}
inline thread_local Core* tlsCore = nullptr;

inline std::mutex& PrintMu()
{
    static std::mutex m;
    return m;
}

[[noreturn]] inline void Die(int code)
{
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
}

// One line to stderr: "cvtile-twin: error: <core>: <api>: <message>", then exit with status 3.
[[noreturn]] inline void Fail(const char* api, const char* fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    {
        std::lock_guard<std::mutex> g(PrintMu());
        const std::string who = tlsCore ? tlsCore->Name() : std::string("host");
        std::fprintf(stderr, "cvtile-twin: error: %s: %s: %s\n", who.c_str(), api, msg);
    }
    Die(kExitApiError);
}

inline void Warn(const char* api, const char* fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> g(PrintMu());
    const std::string who = tlsCore ? tlsCore->Name() : std::string("host");
    std::fprintf(stderr, "cvtile-twin: warning: %s: %s: %s\n", who.c_str(), api, msg);
}

// A rule whose violation the chip turns into a documented fallback (e.g. rounding a count down):
// an error by default, a warning with CVTILE_TWIN_LENIENT=1 (then the chip behaviour is modelled).
inline void Strict(const char* api, const char* msg)
{
    if (Cfg().lenient) {
        Warn(api, "%s", msg);
        return;
    }
    Fail(api, "%s (set CVTILE_TWIN_LENIENT=1 to model the chip's fallback instead)", msg);
}

inline Core* Self(const char* api)
{
    if (tlsCore == nullptr) {
        Fail(api, "called outside a kernel launched with CVTILE_TWIN_RUN");
    }
    return tlsCore;
}
inline Core* NeedAiv(const char* api)
{
    Core* c = Self(api);
    if (c->kind != Kind::AIV) {
        Fail(api, "is a vector-core (AIV) API; it was called on the cube core");
    }
    return c;
}
inline Core* NeedAic(const char* api)
{
    Core* c = Self(api);
    if (c->kind != Kind::AIC) {
        Fail(api, "is a cube-core (AIC) API; it was called on a vector core");
    }
    return c;
}

// Byte pointer into a core's physical space after checking [addr, addr+bytes) fits the capacity.
inline uint8_t* SpacePtr(Core* c, const char* api, const char* role, HW hw, uint64_t addr, uint64_t bytes)
{
    const int i = HwIdx(hw);
    if (hw == HW::GM || hw == HW::MAX) {
        Fail(api, "%s is not an on-chip tensor", role);
    }
    if (c->mem[i].empty()) {
        Fail(api, "%s is in %s, which the %s does not have", role, HwName(hw), c->kind == Kind::AIC ? "AIC" : "AIV");
    }
    const uint64_t cap = c->mem[i].size();
    if (addr + bytes > cap) {
        Fail(api, "%s touches %s bytes [%llu, %llu), beyond the %s capacity of %llu bytes", role, HwName(hw),
            static_cast<unsigned long long>(addr), static_cast<unsigned long long>(addr + bytes), HwName(hw),
            static_cast<unsigned long long>(cap));
    }
    return c->mem[i].data() + addr;
}

inline void CheckAlign(const char* api, const char* role, HW hw, uint64_t addr, uint64_t align)
{
    if (addr % align != 0) {
        Fail(api, "%s starts at %s byte %llu, which is not %llu-byte aligned", role, HwName(hw),
            static_cast<unsigned long long>(addr), static_cast<unsigned long long>(align));
    }
}

// ---------------------------------------------------------------- GM allocations
struct GmRegistry {
    std::mutex mu;
    std::map<uintptr_t, size_t> blocks;
};
inline GmRegistry& Gm()
{
    static GmRegistry r;
    return r;
}

// Allocate zeroed GM for a twin launch; accesses through tensors inside it are bounds-checked.
inline void* GmAlloc(size_t bytes)
{
    const size_t n = bytes == 0 ? 1 : bytes;
    void* p = std::aligned_alloc(512, (n + 511) / 512 * 512);
    if (p == nullptr) {
        Fail("cvtile_twin::GmAlloc", "out of host memory (%zu bytes)", bytes);
    }
    std::memset(p, 0, (n + 511) / 512 * 512);
    std::lock_guard<std::mutex> g(Gm().mu);
    Gm().blocks[reinterpret_cast<uintptr_t>(p)] = n;
    return p;
}
inline void GmFree(void* p)
{
    if (p == nullptr) {
        return;
    }
    {
        std::lock_guard<std::mutex> g(Gm().mu);
        Gm().blocks.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
}
// Check a GM byte range. root/rootBytes: the buffer given to SetGlobalBuffer (rootBytes 0 = unknown).
inline void GmCheck(const char* api, const char* role, const uint8_t* root, uint64_t rootBytes, const uint8_t* p,
    uint64_t bytes)
{
    if (bytes == 0) {
        return;
    }
    if (root == nullptr || p == nullptr) {
        Fail(api, "%s is a GlobalTensor without SetGlobalBuffer", role);
    }
    if (rootBytes > 0) {
        if (p < root || p + bytes > root + rootBytes) {
            Fail(api, "%s touches GM bytes [%lld, %lld) of a GlobalTensor of %llu bytes", role,
                static_cast<long long>(p - root), static_cast<long long>(p - root + static_cast<int64_t>(bytes)),
                static_cast<unsigned long long>(rootBytes));
        }
        return;
    }
    std::lock_guard<std::mutex> g(Gm().mu);
    auto& b = Gm().blocks;
    auto it = b.upper_bound(reinterpret_cast<uintptr_t>(root));
    if (it == b.begin()) {
        return;
    }
    --it;
    const uintptr_t s = it->first;
    const uintptr_t e = s + it->second;
    if (reinterpret_cast<uintptr_t>(root) >= e) {
        return; // not a twin GM allocation: unchecked
    }
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (a < s || a + bytes > e) {
        Fail(api, "%s touches GM bytes [%lld, %lld) of a GmAlloc block of %zu bytes", role,
            static_cast<long long>(a - s), static_cast<long long>(a - s + bytes), it->second);
    }
}

// ---------------------------------------------------------------- events (intra-core)
inline const char* EventName(AscendC::HardEvent e)
{
    static const char* n[] = {"MTE2_MTE1", "MTE1_MTE2", "MTE1_M", "M_MTE1", "MTE2_V", "V_MTE2", "MTE3_V", "V_MTE3",
        "M_V", "V_M", "V_V", "MTE3_MTE1", "MTE1_MTE3", "MTE1_V", "MTE2_M", "M_MTE2", "V_MTE1", "M_FIX", "FIX_M",
        "MTE3_MTE2", "MTE2_MTE3", "S_V", "V_S", "S_MTE2", "MTE2_S", "S_MTE3", "MTE3_S", "MTE2_FIX", "FIX_MTE2", "FIX_S",
        "M_S", "FIX_MTE3", "MTE1_FIX", "FIX_MTE1", "FIX_FIX"};
    const unsigned i = static_cast<unsigned>(e);
    return i < sizeof(n) / sizeof(n[0]) ? n[i] : "?";
}

inline const char* PipeName(pipe_t p)
{
    switch (p) {
        case PIPE_S: return "PIPE_S";
        case PIPE_V: return "PIPE_V";
        case PIPE_M: return "PIPE_M";
        case PIPE_MTE1: return "PIPE_MTE1";
        case PIPE_MTE2: return "PIPE_MTE2";
        case PIPE_MTE3: return "PIPE_MTE3";
        case PIPE_ALL: return "PIPE_ALL";
        case PIPE_FIX: return "PIPE_FIX";
        default: return "PIPE_?";
    }
}

// Does core kind k of the configured arch own pipe p?
inline bool CoreHasPipe(Kind k, pipe_t p)
{
    if (p == PIPE_S || p == PIPE_ALL) {
        return true;
    }
    if (k == Kind::AIV) {
        return p == PIPE_V || p == PIPE_MTE2 || p == PIPE_MTE3;
    }
    if (Cfg().arch == 35) {
        return p == PIPE_M || p == PIPE_MTE1 || p == PIPE_MTE2 || p == PIPE_FIX;
    }
    return p == PIPE_M || p == PIPE_MTE1 || p == PIPE_MTE2 || p == PIPE_MTE3 || p == PIPE_FIX;
}

inline void EventPipes(AscendC::HardEvent e, pipe_t& src, pipe_t& dst)
{
    static const pipe_t t[][2] = {{PIPE_MTE2, PIPE_MTE1}, {PIPE_MTE1, PIPE_MTE2}, {PIPE_MTE1, PIPE_M},
        {PIPE_M, PIPE_MTE1}, {PIPE_MTE2, PIPE_V}, {PIPE_V, PIPE_MTE2}, {PIPE_MTE3, PIPE_V}, {PIPE_V, PIPE_MTE3},
        {PIPE_M, PIPE_V}, {PIPE_V, PIPE_M}, {PIPE_V, PIPE_V}, {PIPE_MTE3, PIPE_MTE1}, {PIPE_MTE1, PIPE_MTE3},
        {PIPE_MTE1, PIPE_V}, {PIPE_MTE2, PIPE_M}, {PIPE_M, PIPE_MTE2}, {PIPE_V, PIPE_MTE1}, {PIPE_M, PIPE_FIX},
        {PIPE_FIX, PIPE_M}, {PIPE_MTE3, PIPE_MTE2}, {PIPE_MTE2, PIPE_MTE3}, {PIPE_S, PIPE_V}, {PIPE_V, PIPE_S},
        {PIPE_S, PIPE_MTE2}, {PIPE_MTE2, PIPE_S}, {PIPE_S, PIPE_MTE3}, {PIPE_MTE3, PIPE_S}, {PIPE_MTE2, PIPE_FIX},
        {PIPE_FIX, PIPE_MTE2}, {PIPE_FIX, PIPE_S}, {PIPE_M, PIPE_S}, {PIPE_FIX, PIPE_MTE3}, {PIPE_MTE1, PIPE_FIX},
        {PIPE_FIX, PIPE_MTE1}, {PIPE_FIX, PIPE_FIX}};
    const unsigned i = static_cast<unsigned>(e);
    src = t[i][0];
    dst = t[i][1];
}

// Returns false when the event is to be ignored on this core (arch35 split pipes, as the real header does).
inline bool EventUsable(Core* c, AscendC::HardEvent e, const char* api)
{
    pipe_t s, d;
    EventPipes(e, s, d);
    if (CoreHasPipe(c->kind, s) && CoreHasPipe(c->kind, d)) {
        return true;
    }
    if (Cfg().arch == 35) {
        return false;
    }
    Fail(api, "HardEvent::%s joins %s and %s, which the %s does not both have", EventName(e), PipeName(s),
        PipeName(d), c->kind == Kind::AIC ? "AIC (cube core)" : "AIV (vector core)");
}

inline void EndOfKernelEvents(Core* c)
{
    std::string left;
    for (int e = 0; e < static_cast<int>(AscendC::HardEvent::MAX); ++e) {
        for (int id = 0; id < 8; ++id) {
            if (c->evt[e][id]) {
                char b[64];
                std::snprintf(b, sizeof(b), "%sSetFlag<HardEvent::%s>(%d)", left.empty() ? "" : ", ",
                    EventName(static_cast<AscendC::HardEvent>(e)), id);
                left += b;
            }
        }
    }
    if (!left.empty()) {
        const std::string m = "kernel ended with events set but never waited: " + left;
        Strict("end of kernel", m.c_str());
    }
}

// ---------------------------------------------------------------- cross-core flags
inline std::string DescribeWait(const Core* c)
{
    char b[160];
    if (!c->live) {
        return c->Name() + " has finished";
    }
    if (!c->blocked) {
        return c->Name() + " is running";
    }
    std::snprintf(b, sizeof(b), " waits in CrossCoreWaitFlag<%d>(flagId=%d) (counter %d)", c->waitMode, c->waitId,
        c->waitCounter ? *c->waitCounter : -1);
    return c->Name() + b;
}

[[noreturn]] inline void ReportDeadlock(Launch& L, const std::vector<Core*>& who, const char* why)
{
    {
        std::lock_guard<std::mutex> g(PrintMu());
        std::fprintf(stderr, "cvtile-twin: deadlock: %s\n", why);
        for (Core* c : who) {
            std::fprintf(stderr, "cvtile-twin: deadlock:   %s\n", DescribeWait(c).c_str());
        }
    }
    (void)L;
    Die(kExitDeadlock);
}

inline std::vector<Core*> GroupCores(Launch& L, int g)
{
    std::vector<Core*> v;
    for (auto& c : L.cores) {
        if (c->group == g) {
            v.push_back(c.get());
        }
    }
    return v;
}

inline bool StuckSet(const std::vector<Core*>& v)
{
    bool anyLive = false;
    for (Core* c : v) {
        if (!c->live) {
            continue;
        }
        anyLive = true;
        if (!c->blocked || c->waitCounter == nullptr || *c->waitCounter != 0) {
            return false;
        }
    }
    return anyLive;
}

// Under L.mu: fail when the caller's group (or the whole launch) can no longer make progress.
inline void CheckDeadlock(Launch& L, Core* me)
{
    std::vector<Core*> all;
    for (auto& c : L.cores) {
        all.push_back(c.get());
    }
    if (StuckSet(all)) {
        ReportDeadlock(L, all, "every live core of the launch is blocked in a cross-core wait");
    }
    auto grp = GroupCores(L, me->group);
    bool mode0 = false;
    for (Core* c : grp) {
        mode0 = mode0 || (c->live && c->blocked && c->waitMode == 0);
    }
    if (!mode0 && StuckSet(grp)) {
        ReportDeadlock(L, grp, "every live core of this AI Core group is blocked in a cross-core wait");
    }
}

inline void BumpCounter(uint8_t& ctr, Core* target, const char* api, int id)
{
    if (ctr >= 15) {
        Fail(api, "flag %d of %s would exceed 15 (16 sets without a matching CrossCoreWaitFlag; the chip's counter "
                  "saturates at 15)",
            id, target->Name().c_str());
    }
    ++ctr;
}

inline void CrossSet(uint8_t mode, pipe_t pipe, uint16_t flagId, const char* api)
{
    Core* me = Self(api);
    Launch& L = *CurLaunch();
    const bool a35 = Cfg().arch == 35;
    if (mode != 0 && mode != 1 && mode != 2 && !(a35 && mode == 4)) {
        Fail(api, "modeId %d is not supported (arch%d supports %s)", mode, Cfg().arch, a35 ? "0, 1, 2, 4" : "0, 1, 2");
    }
    if (pipe == PIPE_ALL || (pipe == PIPE_S && mode != 4)) {
        Fail(api, "pipe %s is not allowed for modeId %d", PipeName(pipe), mode);
    }
    if (!CoreHasPipe(me->kind, pipe)) {
        Fail(api, "the %s has no %s", me->kind == Kind::AIC ? "AIC" : "AIV", PipeName(pipe));
    }
    if (L.type == KERNEL_TYPE_AIV_ONLY || L.type == KERNEL_TYPE_AIC_ONLY) {
        Fail(api, "cross-core sync needs a MIX kernel type; the hardware does not start the sync module for %s",
            L.type == KERNEL_TYPE_AIV_ONLY ? "KERNEL_TYPE_AIV_ONLY" : "KERNEL_TYPE_AIC_ONLY");
    }
    if ((mode == 1 || mode == 2) && !L.mixed()) {
        Fail(api, "modeId %d needs KERNEL_TYPE_MIX_AIC_1_1 or KERNEL_TYPE_MIX_AIC_1_2", mode);
    }
    if (mode == 4 && L.type != KERNEL_TYPE_MIX_AIC_1_2) {
        Fail(api, "modeId 4 needs KERNEL_TYPE_MIX_AIC_1_2");
    }
    const int maxId = (mode == 4 && me->kind == Kind::AIC) ? 31 : 15;
    if (flagId > maxId) {
        Fail(api, "flagId %u is outside 0..%d (the hardware would use its low bits)", flagId, maxId);
    }
    std::unique_lock<std::mutex> lk(L.mu);
    const int g = me->group;
    if (mode == 2) {
        if (me->kind == Kind::AIC) {
            for (Core* v : L.aiv[g]) {
                BumpCounter(v->counter[flagId], v, api, flagId);
            }
        } else {
            BumpCounter(me->pend2[flagId], me, api, flagId);
            bool all = true;
            for (Core* v : L.aiv[g]) {
                all = all && v->pend2[flagId] > 0;
            }
            if (all) {
                for (Core* v : L.aiv[g]) {
                    --v->pend2[flagId];
                }
                BumpCounter(L.aic[g]->counter[flagId], L.aic[g], api, flagId);
            }
        }
    } else if (mode == 1) {
        if (me->kind == Kind::AIC) {
            Fail(api, "modeId 1 synchronises the AIVs of a group; it was called on the AIC");
        }
        BumpCounter(me->pend1[flagId], me, api, flagId);
        bool all = true;
        for (Core* v : L.aiv[g]) {
            all = all && v->pend1[flagId] > 0;
        }
        if (all) {
            for (Core* v : L.aiv[g]) {
                --v->pend1[flagId];
                BumpCounter(v->counter[flagId], v, api, flagId);
            }
        }
    } else if (mode == 0) {
        auto& peers = me->kind == Kind::AIC ? L.allAic : L.allAiv;
        BumpCounter(me->pend0[flagId], me, api, flagId);
        bool all = true;
        for (Core* p : peers) {
            all = all && p->pend0[flagId] > 0;
        }
        if (all) {
            for (Core* p : peers) {
                --p->pend0[flagId];
                BumpCounter(p->counter[flagId], p, api, flagId);
            }
        }
    } else { // mode 4
        if (me->kind == Kind::AIC) {
            Core* v = L.aiv[g][flagId >= 16 ? 1 : 0];
            BumpCounter(v->counter4[flagId % 16], v, api, flagId);
        } else {
            Core* a = L.aic[g];
            BumpCounter(a->counter4[me->sub * 16 + flagId], a, api, flagId);
        }
    }
    lk.unlock();
    L.cv.notify_all();
}

inline void CrossWait(uint8_t mode, pipe_t pipe, uint16_t flagId, const char* api)
{
    Core* me = Self(api);
    Launch& L = *CurLaunch();
    const bool a35 = Cfg().arch == 35;
    (void)pipe;
    // On arch22 the template arguments of CrossCoreWaitFlag have no effect; on arch35 mode 4 uses its own counters.
    const bool m4 = a35 && mode == 4;
    if (a35 && mode != 0 && mode != 1 && mode != 2 && mode != 4) {
        Fail(api, "modeId %d is not supported", mode);
    }
    if (L.type == KERNEL_TYPE_AIV_ONLY || L.type == KERNEL_TYPE_AIC_ONLY) {
        Fail(api, "cross-core sync needs a MIX kernel type; the hardware does not start the sync module");
    }
    const int maxId = (m4 && me->kind == Kind::AIC) ? 31 : 15;
    if (flagId > maxId) {
        Fail(api, "flagId %u is outside 0..%d (the hardware would use its low bits)", flagId, maxId);
    }
    uint8_t* ctr = m4 ? &me->counter4[flagId] : &me->counter[flagId];
    std::unique_lock<std::mutex> lk(L.mu);
    const auto t0 = std::chrono::steady_clock::now();
    while (*ctr == 0) {
        me->blocked = true;
        me->waitMode = m4 ? 4 : mode;
        me->waitId = flagId;
        me->waitCounter = ctr;
        CheckDeadlock(L, me);
        L.cv.wait_for(lk, std::chrono::milliseconds(50));
        if (*ctr != 0) {
            break;
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > Cfg().timeoutSec) {
            std::vector<Core*> all;
            for (auto& c : L.cores) {
                all.push_back(c.get());
            }
            char why[128];
            std::snprintf(why, sizeof(why), "a cross-core wait lasted more than %.1f s (CVTILE_TWIN_TIMEOUT)",
                Cfg().timeoutSec);
            ReportDeadlock(L, all, why);
        }
    }
    me->blocked = false;
    me->waitCounter = nullptr;
    --*ctr;
}

// ---------------------------------------------------------------- launcher
inline void SetTarget(const char* soc)
{
    const std::string s = soc ? soc : "";
    int want = 0;
    if (s.rfind("Ascend910B", 0) == 0 || s.rfind("Ascend910_93", 0) == 0 || s == "arch22") {
        want = 22;
    } else if (s.rfind("Ascend950", 0) == 0 || s == "arch35") {
        want = 35;
    } else {
        Fail("cvtile_twin::SetTarget", "unknown target '%s' (use Ascend910B*, Ascend910_93*, Ascend950*)", s.c_str());
    }
    if (want != Cfg().arch) {
        Fail("cvtile_twin::SetTarget",
            "target '%s' is arch%d but this program was compiled for __NPU_ARCH__ %d (arch%d); rebuild with "
            "-D__NPU_ARCH__=%s",
            s.c_str(), want, __NPU_ARCH__, Cfg().arch, want == 35 ? "3510" : "2201");
    }
}
inline void SetCapacity(AscendC::Hardware hw, uint32_t bytes) { Cfg().cap[HwIdx(hw)] = bytes; }
inline void SetSerialGroups(bool on) { Cfg().serial = on; }
inline void SetTimeout(double seconds) { Cfg().timeoutSec = seconds; }

inline void AllocCoreMem(Core& c)
{
    const uint8_t fill = Cfg().poison ? 0xFF : 0x00;
    auto mk = [&](HW h) { c.mem[HwIdx(h)].assign(Cfg().cap[HwIdx(h)], fill); };
    if (c.kind == Kind::AIV) {
        mk(HW::UB);
    } else {
        mk(HW::L1);
        mk(HW::L0A);
        mk(HW::L0B);
        mk(HW::L0C);
        mk(HW::BIAS);
        mk(HW::FIXBUF);
    }
}

inline void CoreFinished(Launch& L, Core* c)
{
    EndOfKernelEvents(c);
    {
        std::lock_guard<std::mutex> g(L.mu);
        c->live = false;
    }
    L.cv.notify_all();
}

inline void ReportLeftoverFlags(Launch& L)
{
    for (auto& c : L.cores) {
        for (int id = 0; id < 16; ++id) {
            if (c->counter[id]) {
                Warn("end of kernel", "%s: cross-core flag %d still holds %d set(s) nobody waited for",
                    c->Name().c_str(), id, c->counter[id]);
            }
        }
        for (int id = 0; id < 32; ++id) {
            if (c->counter4[id]) {
                Warn("end of kernel", "%s: mode-4 cross-core flag %d still holds %d set(s) nobody waited for",
                    c->Name().c_str(), id, c->counter4[id]);
            }
        }
    }
}

// Run `fn` on blockDim core groups of the given kernel type: MIX_AIC_1_2 = one AIC and two AIVs per group,
// MIX_AIC_1_1 = one AIC and one AIV, AIV_ONLY / MIX_AIV_1_0 = blockDim AIVs, AIC_ONLY / MIX_AIC_1_0 = blockDim
// AICs. All threads of a group run concurrently; groups run concurrently unless SetSerialGroups(true) or
// CVTILE_TWIN_SERIAL=1. Returns 0; a broken rule exits the process (status 3, deadlock 4).
template <typename... P, typename... A>
int Run(void (*fn)(P...), const char* name, uint32_t blockDim, KernelMetaType type, A... args)
{
    static_assert(sizeof...(P) == sizeof...(A), "CVTILE_TWIN_RUN: argument count differs from the kernel's");
    if (CurLaunch() != nullptr) {
        Fail("cvtile_twin::Run", "launches cannot nest");
    }
    if (blockDim == 0) {
        Fail("cvtile_twin::Run", "blockDim is 0 for kernel %s", name);
    }
    auto L = std::make_unique<Launch>();
    L->type = type;
    L->blockDim = blockDim;
    switch (type) {
        case KERNEL_TYPE_MIX_AIC_1_2: L->aivPerGroup = 2; L->hasAic = true; break;
        case KERNEL_TYPE_MIX_AIC_1_1: L->aivPerGroup = 1; L->hasAic = true; break;
        case KERNEL_TYPE_AIV_ONLY:
        case KERNEL_TYPE_MIX_AIV_1_0: L->aivPerGroup = 1; L->hasAic = false; break;
        case KERNEL_TYPE_AIC_ONLY:
        case KERNEL_TYPE_MIX_AIC_1_0: L->aivPerGroup = 0; L->hasAic = true; break;
        default: Fail("cvtile_twin::Run", "kernel type %d is not supported by the twin", static_cast<int>(type));
    }
    L->aic.assign(blockDim, nullptr);
    L->aiv.assign(blockDim, std::vector<Core*>());
    for (uint32_t g = 0; g < blockDim; ++g) {
        if (L->hasAic) {
            auto c = std::make_unique<Core>();
            c->kind = Kind::AIC;
            c->group = static_cast<int>(g);
            c->index = static_cast<int>(g);
            c->blockIdx = g;
            AllocCoreMem(*c);
            L->aic[g] = c.get();
            L->allAic.push_back(c.get());
            L->cores.push_back(std::move(c));
        }
        for (int s = 0; s < L->aivPerGroup; ++s) {
            auto c = std::make_unique<Core>();
            c->kind = Kind::AIV;
            c->group = static_cast<int>(g);
            c->sub = s;
            c->index = static_cast<int>(g) * L->aivPerGroup + s;
            c->blockIdx = static_cast<int64_t>(g) * L->aivPerGroup + s;
            AllocCoreMem(*c);
            L->aiv[g].push_back(c.get());
            L->allAiv.push_back(c.get());
            L->cores.push_back(std::move(c));
        }
    }
    CurLaunch() = L.get();
    auto body = [&](Core* c) {
        tlsCore = c;
        fn(static_cast<P>(args)...);
        CoreFinished(*L, c);
        tlsCore = nullptr;
    };
    auto runCores = [&](const std::vector<Core*>& cs) {
        std::vector<std::thread> th;
        th.reserve(cs.size());
        for (Core* c : cs) {
            th.emplace_back(body, c);
        }
        for (auto& t : th) {
            t.join();
        }
    };
    if (Cfg().serial) {
        for (uint32_t g = 0; g < blockDim; ++g) {
            runCores(GroupCores(*L, static_cast<int>(g)));
        }
    } else {
        std::vector<Core*> all;
        for (auto& c : L->cores) {
            all.push_back(c.get());
        }
        runCores(all);
    }
    ReportLeftoverFlags(*L);
    CurLaunch() = nullptr;
    return 0;
}

} // namespace cvtile_twin

#define CVTILE_TWIN_RUN(kernel, blockDim, kernelType, ...) \
    ::cvtile_twin::Run(kernel, #kernel, blockDim, kernelType, ##__VA_ARGS__)

#endif // CVTILE_TWIN_RUNTIME_H
