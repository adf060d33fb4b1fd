"""The verdict of FusedInferAttentionScore's host tiling: accept a call (and say how it is routed) or reject it.

Model
-----
``check_fia(params, platform)`` runs every rejecting step of op_host in its
order and returns the parsed :class:`~cvtile.tiling.info.FiaInfo` with its
``route`` record, or raises the first ``ParamError``:

arch22 (Atlas A2/A3)
  route (new framework or legacy) ->
  new framework: parse -> checkers -> first capable template -> that template's
  tiling-time rejections;
  legacy: the legacy entry checks (query/key/value/out present, layout and rank,
  attention_out shape) -> the FAI split-fuse, IFA or PFA route's own checks.
arch35 (Ascend 950)
  parse -> checkers -> first capable template -> its tiling-time rejections.

The verdict is cheap (no core split or workspace sizing beyond what a
rejection rule needs), so the whole op_host UT corpus runs in well under a
second.

Invariants
----------
* SUCCESS iff no ``ParamError`` is raised.
* The returned info always carries a ``RouteRecord`` in ``info.route``.
"""

from __future__ import annotations

from .errors import ParamError
from .info import FiaInfo, parse_info
from .params import FiaParams
from .platform import Platform, get_platform
from .route import RouteRecord, choose_template, route_arch22

__all__ = ["check_fia", "verdict"]


def check_fia(params: FiaParams, platform: Platform | str) -> FiaInfo:
    """Run op_host's rejecting pipeline on ``params``; the parsed info with its route, or ``ParamError``."""
    from .checkers.driver import run_checkers
    from .checkers import legacy, templates

    plat = platform if isinstance(platform, Platform) else get_platform(platform)
    if plat.arch == "arch22":
        to_fia, reason = route_arch22(params, plat)
        if not to_fia:
            return legacy.check_legacy(params, plat, reason)
    info = parse_info(params, plat)
    run_checkers(info)
    record = choose_template(info)
    if not record.template:
        raise ParamError("query", params.query.dtype if params.query else None,
                         "no tiling template accepts this call", checker="route")
    info.route = record
    templates.check_template(info)
    return info


def verdict(params: FiaParams, platform: Platform | str) -> tuple[bool, ParamError | None, RouteRecord | None]:
    """(accepted, the error if rejected, the route if accepted) without raising."""
    try:
        info = check_fia(params, platform)
    except ParamError as e:
        return False, e, None
    return True, None, info.route
