"""The convolution engine, in numpy only: the ideas first, then the speed.

Read the modules in this order. The readable ones (``im2col``, ``geometry``) never import
the engines; the Winograd engine and ``algorithms`` run on ``fast``.

=====================  ==========================================================
``im2col``             the idea: im2col and col2im in a few lines of numpy, the
                       convolution as plain loops, the GEMM sizes of a layer
``geometry``           the shapes of a convolution (stride, padding, dilation,
                       output size) and the argument checks every entry point
                       makes once
``winograd``           Winograd F(2 x 2, 3 x 3) in a dozen readable lines, the
                       transform matrices of any F(m, r); then the fast Winograd
                       engine (F(2 x 2, 3 x 3), F(4 x 4, 3 x 3), forward and backward)
``algorithms``         conv2d and conv2d_backward, the course's convolution: im2col,
                       Winograd or the loops, or the timed, cuDNN-style choice
``fast``               for speed, apart: the blocked, threaded im2col engine, bit for
                       bit what im2col and col2im return
=====================  ==========================================================

Nothing is imported here: ``import course_lib.conv`` stays instant; import what you
use from its module, e.g. ``from course_lib.conv.algorithms import conv2d``.
"""
