"""The statuses a batch kernel returns: done, or which state or output array to grow first.

A kernel checks before each message that the arrays can take its worst case (``exchange.room``);
when one cannot, it returns that array's NEED_* status and the index of the first message not
processed, the Python facade grows the array and calls again from there.
"""

OK = 0
NEED_OUTPUT = 1
NEED_ORDERS = 2
NEED_LEVELS = 3
NEED_INDEX = 4
NEED_LADDER = 5
NEED_EXPIRY = 6
