"""Seeded order-flow generators: uniform (the benchmark flow), zero-intelligence, Hawkes.

Each returns an ORDER_DTYPE array that is a pure function of its arguments and seed; ``_book``
is the small numba book they share to pick live orders to cancel and prices that cross.
"""
