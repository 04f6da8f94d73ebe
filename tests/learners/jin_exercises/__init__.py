# 金 -- 第三章练习（按 kit 的 exercises/ 分成几个文件）
from .dropout import *  # noqa
from .heads import *  # noqa
from .masking import *  # noqa
from .modules import *  # noqa
from .scores import *  # noqa
