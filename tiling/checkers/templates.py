"""Template tiling-time rejections: rules a chosen template's own tiling enforces after ``IsCapable``.

Model
-----
Once the registry has picked a template (``route.choose_template``), op_host runs that template's tiling;
a failure there fails the call (no fall-through to the next template). Most template tilings only size
blocks, splits and workspaces and cannot fail on a valid platform. The rules that can:

* arch22 ``FiaTilingNonQuant``: the cores must pair 1 cube to 2 vector units; on a 1:1 platform only the
  MLA templates run (the general non-quant template refuses).

The arch22 MLA / empty-tensor templates and the arch35 templates (GQA, MLA, full quant, the catch-all impl)
have no rejecting branch on a platform the router accepted.

Invariants
----------
* ``check_template`` runs only on calls the checkers accepted and ``info.route`` names the template.
* Every rejection is a ``ParamError`` with ``checker="template"`` and status 561002.
"""

from __future__ import annotations

from ..errors import AclnnStatus, ParamError

CHECKER = "template"


def check_template(info) -> None:
    """Apply the chosen template's own rejections to ``info`` (raises ``ParamError``)."""
    template = info.route.template if info.route is not None else ""
    plat = info.platform
    if template == "FiaTilingNonQuant" and plat.aic and plat.aiv // plat.aic == 1:
        raise ParamError("platform", (plat.aic, plat.aiv),
                         "with one vector unit per cube unit only the MLA templates run; the general "
                         "non-quant template refuses the call", status=AclnnStatus.INNER_TILING_ERROR,
                         checker=CHECKER)
