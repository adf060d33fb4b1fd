"""Route and template choice: arch22 new framework vs the legacy FAI / IFA / PFA tilings, the template
registries by priority, and the route record check_fia attaches."""

from __future__ import annotations

import pytest

from cvtile.tiling.params import TensorMeta as T
from cvtile.tiling.platform import ut_platform
from cvtile.tiling.route import ARCH22_TEMPLATES, ARCH35_TEMPLATES, route_arch22
from cvtile.tiling.verdict import verdict


@pytest.mark.parametrize("arch,base,over,route,template", [
    ("arch22", "gqa", {}, "fia", "FiaTilingNonQuant"),
    ("arch22", "mla", {}, "fia", "FiaTilingNonQuantMla"),
    ("arch22", "gqa", dict(key=(2, 2, 0, 128), value=(2, 2, 0, 128)), "fia", "FiaTilingEmptyTensor"),
    ("arch22", "ifa", {}, "ifa", "IFATiling"),
    ("arch22", "pfa", {}, "pfa", "PromptFlashAttentionTiling"),
    ("arch22", "tnd", {}, "fai", "FlashAttentionInferSplitFuse"),
    ("arch35", "gqa", {}, "fia", "FiaTilingNonQuantArch35"),
    ("arch35", "gqa", dict(atten_mask=T((2, 1, 128, 256), "bool")), "fia", "FusedInferAttentionScoreTilingImpl"),
    ("arch35", "gqa", dict(query=(2, 8, 128, 64), key=(2, 2, 256, 64), value=(2, 2, 256, 64),
                           attention_out=(2, 8, 128, 64)), "fia", "FusedInferAttentionScoreTilingImpl"),
])
def test_route_and_template(verdict_kit, arch, base, over, route, template):
    info = verdict_kit.accept(arch, base, **over)
    assert (info.route.arch, info.route.route, info.route.template) == (arch, route, template)
    assert info.route.reason


def test_registry_priorities_are_ordered():
    for registry in (ARCH22_TEMPLATES, ARCH35_TEMPLATES):
        prios = [p for _, p in registry]
        assert prios == sorted(prios)
    assert ARCH35_TEMPLATES[-1] == ("FusedInferAttentionScoreTilingImpl", 999)


def test_arch35_gqa_long_kv_goes_to_the_catch_all(verdict_kit):
    # the kv the cores stream at once exceeds half of L2: the GQA template is not capable
    info = verdict_kit.accept("arch35", "gqa", num_heads=64, num_key_value_heads=16, query=(4, 64, 128, 128),
                              key=(4, 16, 32768, 128), value=(4, 16, 32768, 128), attention_out=(4, 64, 128, 128))
    assert info.route.template == "FusedInferAttentionScoreTilingImpl"


def test_router_prefers_legacy_for_mha_decode_d256(verdict_kit):
    to_fia, why = route_arch22(verdict_kit.call("ifa"), ut_platform("arch22"))
    assert not to_fia and "D 256" in why
    to_fia, why = route_arch22(verdict_kit.call("gqa"), ut_platform("arch22"))
    assert to_fia


def test_verdict_helper_never_raises(verdict_kit):
    ok, err, route = verdict(verdict_kit.call("gqa", num_heads=3), "Ascend910B3")
    assert not ok and err is not None and route is None
    ok, err, route = verdict(verdict_kit.call("gqa"), "Ascend910B3")
    assert ok and err is None and route.template == "FiaTilingNonQuant"


def test_general_template_refuses_one_to_one_cores(verdict_kit):
    import dataclasses

    from cvtile.tiling.errors import ParamError
    from cvtile.tiling.verdict import check_fia

    plat = ut_platform("arch22")
    one_to_one = dataclasses.replace(plat, aiv=plat.aic)
    with pytest.raises(ParamError) as exc:
        check_fia(verdict_kit.call("gqa"), one_to_one)
    assert exc.value.checker == "template" and "MLA templates" in exc.value.rule
    assert check_fia(verdict_kit.call("mla"), one_to_one).route.template == "FiaTilingNonQuantMla"
