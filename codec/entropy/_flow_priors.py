"""Learned flow priors shipped with semcodec: ``step -> base64(zlib(FlowPrior JSON))``.

Generated (do not edit by hand) with::

    from semcodec.codec.scaffold.flow import fit_flow_prior_from_video
    for scale, step in [(1 / 16, 1.0), (1 / 8, 0.5), (1 / 8, 0.25)]:
        prior = fit_flow_prior_from_video("PETS09-S2L1-full/PETS09-S2L1.avi", range(1, 501),
                                          scale=scale, step=step)
        blob = base64.b64encode(zlib.compress(prior.to_json().encode(), 9)).decode()

i.e. counts of DIS (medium) flow residuals over PETS09-S2L1 frames 1-500 (its training split),
at the level presets' flow grid and step. Digests (``FlowPrior.sha256``)::

    step 1.0: d7942973adf8708449a5a5ce2462962e8fe5e86f2b674bd3ef91957da1664dfc
    step 0.5: fb1a479aa64ebdead3708859b60faa861ef2335a33ffb5d88b249faf572ef1e1
    step 0.25: 64e5952ac2a193402b5cbdfea6dcbdecf0327fde271b580c4f345561e90a07f1
"""

# fmt: off
PRIORS: dict[float, str] = {
    1.0: (
        "eNptWMtu40YQvOcrBJ0SgDame3pePieHADkE2NyMRaC1pMTAem3Y3s0CQf49w6maEUn7YlIS2Y/q6uoe/7s/Pz4/"
        "HF73N/uX08Pd4/F0d33+/PjPn0/P94/P+2n/7fT8cv/4ZX8j0/54erl7vn96bZ/3P//6YfdwOt5/fdjNb+wez7vf"
        "f/njgytXH/Q3uT58u9+dnw8Pp5edXAXndj/Of/DNT9Pur+f74+7l7vD5tHPXLmqYdi+vp6edXLvd0/fqeP5UvV67"
        "af9w+P7n4dPL/ibatH89fPp8qvclTvu7x69fXuv97e3tVZ7043R7FSaZLzaV+eIn7+erTpLjfCOTaJzv3CSpZJvf"
        "qd8ly/WmPlXmx/0U5ovVj/USpvlDnEL9m+p9vcxuDG4UbkThJhm8BIOTqCU2FzlJ81BKc6C5OYjNvjb70uzP96Xe"
        "04uHF6EXx2R6Lj4gFZdC86IWkEdoXgxZNCdCJ81whsXUwfIEq2MF86k06z5moKRIQbUZzxvjqRv3sKoTo8xRgEUQ"
        "BBkNQYouwdbUTBXE6ZrFOY18QUNWaDDaBC8q3gEMLdb8hJgQb/s8o5eao+AQc4Kn2Dzl5qm96LrDdtc82hof7VTy"
        "pJKLcOkTeeQFBWBqQCmueITMlv5Yjti9xjW3lGWJIdFroNdQwC1UveFgKFOYkKUu3Snc6eStJ1JokQZ7FrAHcwuS"
        "bgutHRFQpXoIYD0IqlNApRsOtX6yiAwl9qR9i8938z3xwMzNIXPfUqzmM8wnFFhRXzHU1zX7ebTVxku7yKi1rMAf"
        "XAuoQWAkvvT+ZiRNMGb2IZKMSIyJ6oLS4JkNnjGQ0ZMR9IIcXHqyaVB1bfTccq3REwIT9hIovuhJz8K/0/AjycKG"
        "ooo1FZwJ3lpkJkaCwCC92sqUl4zGXWhYWNFjCfbSf0QnvXFc6FiVRFJDM3thpVsnzb2MPNOSSKCmkdWFrFRchXoh"
        "CmBroRuylQEtlgIByRTVBHmokUaGKkYqaIN8JkPX4Zg9W9IgcakIq0KJy4zXoTIBYHnURgBXanBB+EvvUHKzGomX"
        "dqP+NJGvXgsFWkpBi9Q3nANQzZOfW3j9rjJia9BXDDzV0gJqqxRLvDfEVldiy+nmHdgfoRfpnTd7FSYSiQMXQfaS"
        "sTKVf32etQLX5wSW1Q16hwscupHjKMTDCtyoQxkUkcXRHUPCRkaJWPYhJYLhUVaDdCN7LANrD8lTwOjfBqyc3wI5"
        "dNgFBPHDmr9oszEwLC5zkR2Vpj0dR0ZvASmEXIJwImZuB0vURxqej0e0XJTlw7qavUDigprAgUe1/LtvUDqFr3BK"
        "e4QU3yUbJU9t9Yqxt9BZ871uJ/VWQxM1NDJTbiQcd+apLaNio8ZIplrNLncuav9Jev0ssetifYY/JqKYjQ2pngXr"
        "JFglhRE2bw66ZPrFFzz1GML43hwi1Kxs4G6hP6LqOIw5pCxwIdqSvzCWYAgmUkSSvmWZTNqR2YTU/cWu2TmvWqE/"
        "RmnPRkIXOJOBUOgIgfmZjAx9b2Q7q43F5E10WkhJN+rChTxwYFPuxPoDBYM1UEl9QPTmuARtVsJ1P/Ru9bRSFG4K"
        "DxYWOaA9aGay3FHCUpIEo77JOtaMJhidlgSl1pRC5WNXnI4AnlC+i/PO4nfyhm3u16Sh2FhfLUdQhb2uga3r3YZv"
        "hQpKRovDVnqhbCY0rObmV+aMX0v/OqOenmSxwu7nzyEzXsTUa7Zk3NBpxbPW6wtLbg1LLEOXFm6ETPSd8itGMzEf"
        "lrNNN2OQWsa1kbOiI7QyZ/3UlTKCuYiBcvmzxJ6ouFwQBITBwXjKYQOA8NyQ2J+pLIgxY8w5MVpCCgd9zgwlR9vo"
        "mESjmHIZyFQZvwGAQfTTtxfyoKlG2ykRRpKBYy9yr3ImxKa2rM9FU4N1FlHxXN70hlDXTQBgZHf0swODqLI9xvmQ"
        "N/aVUE5DlKXxEcX4B0MYrMzLFK/Er0REp3684Q5ST/HcDJIDOOh6/jcDx9GF5PEUWieC9XPoKKEX6xWk8Lk8mkuo"
        "+6mvS3kz/ViJjbhar91iHHmubiEkWe2T2xoFqj8bTcRtVISjddmkyqqERDm8TGLy00pff4eQ9fHYZ9+7HZ1s2Yij"
        "+rZpPOVUyZwqY9prP4qjpfxKN+JmBWYpmLlH4rk3/8dp//L3oZ6c9zf7YypWR5g/HM85uWxWDuEQ7k5q8z+U9JTP"
        "p3DK8ayfYrJPR386FykhHQ8Sox3Pd/v/fvgfFzDRWA=="
    ),
    0.5: (
        "eNp1WMtuI8kRvPsrCJ52gdagKjPrpfPuwYAPBsY3YbCgJNIrYLQaSNoHYPjfXV0RWWxy5MuQGpL5jIyM7P/sTy+v"
        "z4f3/e3+7fj88PJ4fPh0+vry5y/fXp9eXvfL/o/j69vTy2/727jsH49vD69P397H3/uf/v5593x8fPr9ebf+Yvdy"
        "2v3z5399Du3ms/wjfjr88bQ7vR6ej2+7eJNC2P2w/oP/+XHZ/fv16XH39nD4etyFT1HSsnt7P37r79Pu21/d7/rX"
        "/rb/ueyfD3/9crh/299mW/bvh/uvx/6+5WX/8PL7b+/9/d3d3Y0u6ctydyNLlvU1Lipq/V1YSkhaQn8bF9Oa+xtZ"
        "YtT+qktc/7Rl/Ula9Et/ubuxJa4WdGkwmBIMSkx1GIwltjjsaUoR9kKGvTDs6bC3Wq3d2LCaYTWNz27gsvvI8BEb"
        "fQQZLlqS4UByHfbFhvkyrMdhnXZjgOGKlwL7GfYTimJIRZcKb1rhLYY0vElJw1uUsPUmSCYPd+t/wWpz12sZYcia"
        "sDQhVZRao6A0WViajOgN9kalMl4QdKX1kXlwJ4pMelDsa4mGqKOKGaqUigxfafjovkY4PXT4kjR81eEqsiv9h2sX"
        "hpOE4l13Xtj5aKEMl9YUje/4MTS+olaJrUHnowyH6dphnF1LH3fN0DW56JoqkW2sdkQ0sSr6VqQgmIEaXYzBIPs8"
        "YrERi8xYmueuCEGW6tlqUtgXQ7YpJuKC5TUgY8xDz6SilbJJt3zQyv+DfUkO/pzY2dYayhwM+DeCSAIaWwomFp4F"
        "ntvwbMOzwrOh6nLR7eajyKYrwikcRc2sQx1QXes8pjsulU2XgfF12lHokUBCGBlDUQba6ogJ/jioAwP9RfCC6hMO"
        "Mc/R4lTz8xv+ak57c/jIBW4KUZwJHI4ORnG0likJQl8rnIEdHRS0jk5DThz7iJzKpsJp5JQ2OanPk8M7fhRmARth"
        "ENfyEw7GBsD1yrjB4w2VDJUUtFKKQ72OcDOQaEQiBv37YOMFHK5j7gbDJnRhpRUpCFLISCEaclBiyLzmRu7QAY4B"
        "pBrn5mgjDdVAYJuCam0skBXYOhJpWEWDTjLSKgBWRRMaytbDq0hGgSZFToqcuMqUGOfnN/z6DUvRkzMk15hcvkyu"
        "MDmspXXH5jqnxHxMvEdWKsmxgi+scWpHAkYcJtByzw5jqwXkn5FdJa4C0stIT5DeHOQxM4KZGTmD22L1dg6Pk28T"
        "C6FEpBdGSMDC9SwE7py/xoLxe7HwNQMPPQjsUuPfii6tFZfMkovXPHEomnM/PumhY5H2VLRxbw/F0ktfG3HVEe+b"
        "sPoCNykAVsoKitLCtRtLAlm3sSTWESFnBm7epuDrgPo3jnXhqLD+4myV0YGKDlR0oKEDCR1I6MDoBwiCdRQMm/Kl"
        "eFsMjADYbjac1FGqrt2K5KIUFBkjk0BUhJQbcg6hpaa0JBEVipYF8Ow4BYdkUsilIYMh1lqdiRrM5JwozBSrgBvX"
        "fy0X+XCxGYRoY4sgQSuz4BKmenWmVimoQIwJpV+3u2uONH6rXPNhCrSz2LhUsty0mZstaxIaD5F7wBqNZxDSWHXT"
        "uK/2D9USQzcnBCvIV3JEsRL3JukgYsO4omQBXJtS5sUMRakN7Y8ZNtS2QlsohQegXZVqYZoNJRQh66qg9Fq3NuKV"
        "Doo2BcAYlZXZXAixAxXXg8JAmdK4no25sB8murHaqG1CgC1pIEmXrLoR23FajOk7k4nhaYy+VFghGEyJIu3K4AzO"
        "yez6JGm+hhk6maxTQaAejLxKCu+EtrlK1Bn64iyZPoyQ4cAnthtVWOvjeE+ZtxUnrMgWNBT0VzcV9XL0M4eI1ERI"
        "pgIwFY6gmGxrP4bubBtgokQApoS0b1OG6YW+oYqvTNn1JZNO5JRo6llnZwbosVRxyWjgfRqgMM22Z4Vurgr7QGBD"
        "uqwXby3CM8w/iYVYlqKVV0N37p+iPtgR/SM/k32k/KbG4SHUw87IbcuBWNnreZYrvlb8gy52wKKimuGpS4M2g1dA"
        "IEUFznrMYRvH5NWpZ7OfnaxfJku44NgQQ1gvUN6502MwVMWgwzoMw4y2EDT9+sHPKmWNXkUTOeJacTdpmFdiKxcj"
        "eRnVhlLjAsq0GJSUOVsjCrO5GBdYSJy/zXdQ9BxZcwmD88YCu7o4+WSg8vjhxqrVWXz22povCSMsQqtcEr4lWuKa"
        "MCAUXDg2FsZhnmK6OcX0nHflZBYrCam3MIHUSDy1KssS9YwmlCUJwGIxbLvjE+vQrv4tLl83Qg9dSSHHPL0bZOuK"
        "G0tOsX5+zF1DmcEV30cK9fcHQ+0qmmTcasadbpsJmkUhs0sjGqSeP4nqezEwYN2CYXpSfrHrRkKihm3usuT5dIM4"
        "J7sLm8zFtF2SceEWqxRTei4X/XVlxFnkUwO7rpV3VYwclZSkt63CZHUC1Dhs1dMD4ltAIFaB93maf68McPyszVY1"
        "PhE8j1BFszUlskSLaSZXyNLAiFq6BhnvO+72WND9NK1jujX5/TfL6cu1A4c6z7KFc1TkBaUKjqVcUKK5apHLZtbG"
        "2hbKOiUJpsaHRpNguo7wIah8oNZZ5BwhObYv6OqsP+F/vgH5IJFlnQ9uqnOvFCpnnSXXQIaNTfg4woKU8zrwh4rJ"
        "XDqLXWDKH4+c5T9v71KcxIrwgUeNyK3lSPkfoSwSWLldbf+2aZLHkTWYXtFE5qcd1r49+wE8G8j9HhuVU75CDp9R"
        "E1gX7LJ+nbMeGuszEZWKkEpCyTS+Ttzlwo6VW1853Enbx5udSXCPtitFUX3BntvTkQguqJkPq2PwA2X+uFIw4Bnf"
        "KurKJVnRPTFm/FpMerXgSPWeqZzXhy++BHS2zYJILt+zsLwXK2IeMBS8fnxSKXUBg2n2e/F8631Z9m+/HiTl/e3+"
        "dB8PVtrhkO14/3g8PHYvXSm0+xxOh0MfpOOpb/B0UD2d7tNjrfdi7XQ49QYeT/EY9//92/8AqNQfLQ=="
    ),
    0.25: (
        "eNp9Wk1vHMkNvedXCHNKgJZRJIv14XNyCJBDgM3NWCxkaZQIsFeG5N0sEOS/p7reY0/3SJuLRzMjVZGPj48f7f+c"
        "Hp9fvt59P308vZ6/3j8/nO8/PH55/vdP316enl9Oy+nX88vr0/PPp4+ynB7Or/cvT9++z/enP//1h5uv54enX77e"
        "rH9x8/x48/e//OOH1G9/0L/Jh7tfn24eX+6+nl9v5NZTuvnj+g8++dNy88+Xp4eb1/u7L+eb9EHUl5vX7+dv42f1"
        "m2+/jYvXt6eP6/vl9PXut5/uPr+ePpa8nL7fff5yHj/3spzun3/5+fv4+dOnT7d5kR+XT7e21PVFFxFff5AlSy3j"
        "p7QU7646fpTFva6/poum9dUWW395HLGe4YuNf8s4b7ysBysOlu3kgpM1u8yTpXtN82DryefBUtI8WMs8uOzOXY/r"
        "cXqB2Y5Ltrsar6q8yeGCaIcDVvO8xnTeImneYvOW9Zs6j23z3+0u4S1CrMT4qvxc+D7hfcfbhnd1HnwL+4fBFQZX"
        "GDyBHRY7Thr++7Q4lzwNltanwbnD4L7Hu0xc6rRbp93AaPqaphXTtmM8DDcyGF5Kmzf2njaMEOSWGi5tbd7qwGkS"
        "pBCuaaXiKourgGLEyADAAIvMalk7wmKDW7hTHX5Wy7wz404wQEkt28XIGCP6Om9G5MIAx8vmediRiXVvcN2tN6Ct"
        "85PxKwbXKwiiwHvSpSy2A1zeAA5SiIdJlsiO/j5r8Ne38GdYboCu0AGjBwElo9cTw9cB5TC4ThdaL/Agg+K9guIN"
        "OIIyM4R13tEWny44XPDgzMUTwwswpRe6IX6NsTADJ6tWkD0z2FIBcukCSk9fxukJuT4ZMJI9I9sFod7HOu9gxk2y"
        "kxsi1GGAdbLNEkVAZRJwmJRJ8DJPX8UGIEkCw50odZjg04Q2TbBDailgsp1B7Y1BhYh0IqKqoJ3UipiNexWQkHZS"
        "5MB+8E4ISZr2lGlPOdizN2QvXyFb+juy9S4RG4jYScSMMAuFy5hMMsO7Brr2DJyzKbOpGMUr1Avp1BHpWQVGpOve"
        "LcBc4VbeubXBPA8Hulo3Jyk272h1OJ2vnDY4XeB0htOdwmXw2jq8nq6tcp1ZzGpiiZGUWcyyQctKBb+1kV0JXsvU"
        "+qHacNvArsmFIdwdQkI5UzheD+qa4bhBXhT0V5DOAINGAobo5MXpvtN9P7qPct+gDAMAFKICsV/jDtUe1yZiUHIw"
        "uoqQ0qLC2CfWrZwQ+1oR+1yRYzor8Di3KiVdJw7z4wZ962DXamRiojHTJvuEhZvOCUr3wMKhUzXy8CJXSFUFGRSo"
        "2ZYhGhkREk0VJrz7DKpEswaZthTqzKHGJOos/iyFyP41l6no1qgPbTozNbOWrTIZNauHZlU0SM0hEZ4gETYh8vU3"
        "geeWTihQE9cLoABQUAOFNXkHqJBdHYg2IFqCZBPRigKQAawB2AkzqoB6JOd8h0johrZH70auZmETR84ahcgqX0NJ"
        "mcoGJbg1ctnIZWX0tFFy2Xkpi+lqFrqtHD8Y6+ogAD8RJsTwD5Ec/mYoxyCnkh3s1gpq1sqPXkN10NGtkOZQHumd"
        "dFHPkX6I+jhd2S16IWVqi/aJLbOvbXGUWStGBbZO4rgZ+LpUSRDhJojkUowdpNXm0CPLKLjiLLmSEshTFb2NO7IR"
        "HF1JTUFWnLr2pYkZaQUMAlHz0piTjQJVCjjkCSSaRw9Up+AMmGeiBO5rIDoJRUY1MKojcRuI5SBWB7GmX2CBQTQH"
        "R2aagDKDQbOrhGga0x/0MtCTpMuQ3owqkfObLsdZByJlhX2YtQlRGhB6hatLduasaGJZ57jxTpd8fYOFyLa4IRVo"
        "whgJtLFrrugbMCUYsjmmJtlPY+3qsqjmdpzRGqsaxo9Z1ASTnznlHJ7Uw3i2v8IXFgyhvilbVg9xK2gITVqUCjY/"
        "+xEn74/exjw5jHkxNOVcWINTAe0GURuqsDn64MZOHn2wsPiwh5+X9IiARJCdIXCi0qw5Bxd1GD8KHrtZ4eCSEAPj"
        "yNDmRf0wo6FjSTEm7keWbUwssKXRlJihrcdky24ra+7RRMbsgr6jKLKcOS672cXfDrn9fWvKgZtBl635C/p7tLT4"
        "ZCUQqe8gDBtatkAiG/yXQeqYaEEe8lKi25LKJMjQNxfMO8J5Rzkhg5p1N6rabpK4npDfGSiu09MOc7sQAZMISIkW"
        "qM8JTIYgclei0N0KYmTU676b3WU3u1/frod8DWbGJFsCF+8Uh+LApUqmNACXKR4ZfIzbfcPl92b3KJkEdB1AqXyq"
        "dLwJ9wfs+jPdjovptpGG0aW8maGPg7z59XBi72VJY1FM3GGFcZkZW6dArnRhc75JckKSGGGpb1cbkaeXbY8ctjt+"
        "mNeRCQ7+DZNKTAwRq7qteCrFVVtCsvTOzM0c/zgRkypHzDgnXXis26ph6/rfX0hxmr7lJLlymssoid5eOzWvGcdn"
        "yY3a2gogbFzVoJdZrYW0FlhrHFbLbsWQ9xE+2pxjYmFoVa4mmEtPHoNdZ4NlDEu5mmyiE0/sxBucn/bNSGWGahtt"
        "OnUNAzl0NvYXzdmKa05Rr5TrA1QsyxzwGkUHmu+Il0FsFSzvh/muoIdiB2VooLb1EdXonWFG0Awd++pxHDKxFC0F"
        "ZXsUCX5nDuEc85fju8G+Gt+Kc9XLaWON6XFrGLWQgs9eRKl16om1B4gAD7YhcQeV2xLXHtvt7rx/VFXm6UiFGGkZ"
        "/yG1OKDkRis7W9tj7djaA43pNHEDVXMmgyFRGcIscuiX9ptf+LvKqsDREl+oVkDg6DSGO9kuf0XdKTkXIlqQ4/b+"
        "/rocLI/kKx3HDMaxyBeurjr7sD3Setj3CgRj7mO4GtQ9Wuv3XF1427bNjdU0BfgWMsBF45AxFBhVLq1mg28hl3rJ"
        "VznMznq9eMnsNyrSU7kmNw7KLbSpRuXZ+rEcG9yWPUdyth7LPWnsJ0NOM5s/b5USxXVyRQfSsIOZ0HKCX+sOd6Ed"
        "SdqRpO29JQyTVK8WpHOesYPcrRgLB4XaM4i8EvTI9dHMMV29Ygcykjsh9PX6d8UisXBcKwyix29GNcQi1DJ7ZI1n"
        "LoAJHVrYWSV29Hz4g3s2/lyeIDQl0TQJeKTGHZjoZiytLQojctsyQ7mxFpqBBiA2yfHUAIujtcXERDnu5dygO825"
        "pGAjfgjjGlxaspXhpNz+UxaG6NHDzUXyrHojclUYjMwauJ2aY3Iibs5yWZVPNmCm70Vxi2H0jrXUg25frE1UIgcO"
        "4xOrxO2Yf0s8ZeEKyUpkBhbwin3GRaQBmB76rK3BojxF3x/9lYRZXqhQXsjlmhAWZ+ePcpuxCLtMXumqAdwLl1N0"
        "R2CcKTJSmV9iIk3ra4hiqjltcce3eHa1HnUddyZWLpQxA4p9w2SXq8abSkJYfKu0njPD0Ss7S9dLcbBO+Y8HS735"
        "ob/OG71TPBWISrN1qvEgh5atfz6OTKT/xnRrEk0uRsCVTrYV10LhHigZi3VSjSTTGHEDHBxllRohJodMHsi6wMDc"
        "NwtqlJoknItz7H8vWJYaWq1M/dwTC3jon0enenxmug0hnH8a2zRvZdNLPmYadaBFZDGuz008Kr1niJxwGsm6f9BT"
        "d72qHZ7oXT1QWTWL65FqvUZbeOmmhOzICQPIzN9Q201g03YGhIIrFr/ShqxH1Y6A5L1crnzBlSPOLANb79eMK5fB"
        "ZCr0KJK270c22XANYifqs7LlkOsHW2RwPGtX7kZSjyvIgHrVkDQMXytzr1u81Nv2ZJjAtcpx4+p3aymRgTFvlyv8"
        "4lQ2CaN5ytyJpqg4YRkyvZXGZ5TpksqlxiqMKqCF/wuiX1VCKew0a6f8DMlNAd4+Wun/PqcWIptjBmvsA2sltmZC"
        "alPMFWpet/8vMTcqPy6n13/dqZfTx1PJ5/U/ctzd6530MbLoZ7///PB4visP4/V8/5hM6+PDWat8HqX1Pj9adi9y"
        "7uku1Uc5/fcP/wN7x1Cl"
    ),
}
# fmt: on
