"""cvtile.tiling: a mirror of CANN ops-transformer's op_host tiling for FusedInferAttentionScore (this
module's exports), FlashAttentionScore (``tiling.fas``: ``tile_fas`` -> ``FasTiling``, arch22) and
RingAttentionUpdate (``tiling.ring_attention_update``).

Host code in plain Python: the platform table, the parameter record, the
checkers (typed ``ParamError`` with aclnn status codes), the route and template
choice (arch22 = Atlas A2/A3, arch35 = Ascend 950), block sizes, the core
split and the flash-decode plan, the workspace size and the tiling key. The
FIA result is a ``FiaTiling`` whose ``explain()`` lists every decision with the rule
that made it. Depends on nothing else in cvtile.
"""

from .errors import AclnnStatus, ParamError
from .params import FiaParams, TensorMeta
from .platform import DEFAULT_TARGET, Platform, get_platform, platform_names, ut_platform
from .result import CoreWork, Decision, FdTask, FdVectorWork, FiaTiling, RowTask

__all__ = [
    "AclnnStatus", "ParamError", "FiaParams", "TensorMeta", "DEFAULT_TARGET", "Platform", "get_platform",
    "platform_names", "ut_platform", "CoreWork", "Decision", "FdTask", "FdVectorWork", "FiaTiling", "RowTask",
]

from .fas import FasParams, FasTask, FasTiling, format_fas_tiling, tile_fas  # noqa: E402

__all__ += ["FasParams", "FasTask", "FasTiling", "format_fas_tiling", "tile_fas"]
