import unittest

from src.calc import add


class AddMoreTest(unittest.TestCase):
    def test_other_sums(self):
        self.assertEqual(add(10, 5), 15)
        self.assertEqual(add(-1, 1), 0)
