"""The saved runs' fitted figures and p-values, pinned at the values main computed (commit 627fbc0) with the
hand-written Student t quantile, Mann-Whitney U test and bootstrap that scipy.stats replaced.

The tables print figures to 3 significant digits and p-values to 2; every value here must agree to 1e-6
(relative), far inside that: the intervals come from the same seeded draws, the t quantiles and p-values
from the same formulas, now in scipy.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis.compare import figure_table, point_columns, point_table
from analysis.fits import fit_all
from analysis.load import load_runs

DATA = Path(__file__).parent / "data"
PRECISION = 1e-6

#: ``fit_host`` of each saved run, with and without its raw samples (CI by bootstrap over points and samples,
#: or over points alone): (file, samples) -> column -> value (None: NaN).
HOST_FITS = {
    ("cpu-2core-full.json", True): {
        "t0_s": 3.3547163752243206e-07,
        "t0_low_s": 2.876210433430054e-07,
        "t0_high_s": 3.587214223246474e-07,
        "cache_s_per_element": 1.4864337539299737e-10,
        "cache_s_per_element_low": 9.419170389394083e-11,
        "cache_s_per_element_high": 2.6984814374641984e-10,
        "r_inf_per_s": 6727511383.242649,
        "r_inf_low_per_s": 3705787952.129529,
        "r_inf_high_per_s": 10616646250.778017,
        "n_half": 2256.8892601872135,
        "n_half_low": 1202.0927023570196,
        "n_half_high": 3732.262313836411,
        "dram_s_per_element": 7.790763639053976e-10,
        "dram_s_per_element_low": 7.790763639053976e-10,
        "dram_s_per_element_high": 7.838365338879437e-10,
        "copy_bytes_per_s": 22589277147.48724,
        "triad_bytes_per_s": 10544805367.273462,
        "read_bytes_per_s": None,
        "ci_method": "bootstrap over points and their raw samples",
    },
    ("cpu-2core-full.json", False): {
        "t0_s": 3.3547163752243206e-07,
        "t0_low_s": 2.868832368655195e-07,
        "t0_high_s": 3.583250594291761e-07,
        "cache_s_per_element": 1.4864337539299737e-10,
        "cache_s_per_element_low": 9.370327639689386e-11,
        "cache_s_per_element_high": 2.679666783290152e-10,
        "r_inf_per_s": 6727511383.242649,
        "r_inf_low_per_s": 3731807276.321792,
        "r_inf_high_per_s": 10671985425.18785,
        "n_half": 2256.8892601872135,
        "n_half_low": 1211.4303981181542,
        "n_half_high": 3741.44777526171,
        "dram_s_per_element": 7.790763639053976e-10,
        "dram_s_per_element_low": None,
        "dram_s_per_element_high": None,
        "copy_bytes_per_s": 22589277147.48724,
        "triad_bytes_per_s": 10544805367.273462,
        "read_bytes_per_s": None,
        "ci_method": "bootstrap over points",
    },
    ("cpu-2core-epyc-full.json", True): {
        "t0_s": 2.79868798556364e-07,
        "t0_low_s": 2.6349707689956543e-07,
        "t0_high_s": 3.135786865890064e-07,
        "cache_s_per_element": 6.628074270281521e-11,
        "cache_s_per_element_low": 5.342682721799532e-11,
        "cache_s_per_element_high": 8.821436106631246e-11,
        "r_inf_per_s": 15087338482.064503,
        "r_inf_low_per_s": 11336022705.512547,
        "r_inf_high_per_s": 18717188574.940834,
        "n_half": 4222.47529438859,
        "n_half_low": 3101.954915815963,
        "n_half_high": 5614.736033741412,
        "dram_s_per_element": 2.520400959878867e-10,
        "dram_s_per_element_low": 2.520400959878867e-10,
        "dram_s_per_element_high": 2.5363624877682053e-10,
        "copy_bytes_per_s": 32685703208.96683,
        "triad_bytes_per_s": 26752622354.03617,
        "read_bytes_per_s": 35371441629.67856,
        "ci_method": "bootstrap over points and their raw samples",
    },
    ("cpu-2core-epyc-full.json", False): {
        "t0_s": 2.79868798556364e-07,
        "t0_low_s": 2.630206769644743e-07,
        "t0_high_s": 3.081580517507972e-07,
        "cache_s_per_element": 6.628074270281521e-11,
        "cache_s_per_element_low": 5.384669791551375e-11,
        "cache_s_per_element_high": 8.759673089471926e-11,
        "r_inf_per_s": 15087338482.064503,
        "r_inf_low_per_s": 11415951140.937893,
        "r_inf_high_per_s": 18571240924.912693,
        "n_half": 4222.47529438859,
        "n_half_low": 3119.4975634746033,
        "n_half_high": 5449.680593423912,
        "dram_s_per_element": 2.520400959878867e-10,
        "dram_s_per_element_low": None,
        "dram_s_per_element_high": None,
        "copy_bytes_per_s": 32685703208.96683,
        "triad_bytes_per_s": 26752622354.03617,
        "read_bytes_per_s": 35371441629.67856,
        "ci_method": "bootstrap over points",
    },
    ("cpu-2core-quick.json", True): {
        "t0_s": 3.4693192549647914e-07,
        "t0_low_s": 3.1000237806636714e-07,
        "t0_high_s": 3.612072409811747e-07,
        "cache_s_per_element": 1.374904375979966e-10,
        "cache_s_per_element_low": 1.1188168779554167e-10,
        "cache_s_per_element_high": 1.7351737462135942e-10,
        "r_inf_per_s": 7273233087.84473,
        "r_inf_low_per_s": 5763111631.8014145,
        "r_inf_high_per_s": 8938013178.952496,
        "n_half": 2523.316759750675,
        "n_half_low": 1973.1702059164506,
        "n_half_high": 3212.4919385584376,
        "dram_s_per_element": 8.172789363580826e-10,
        "dram_s_per_element_low": 8.172789363580826e-10,
        "dram_s_per_element_high": 8.399285986720413e-10,
        "copy_bytes_per_s": 23611352789.746628,
        "triad_bytes_per_s": 11584197027.523857,
        "read_bytes_per_s": None,
        "ci_method": "bootstrap over points and their raw samples",
    },
    ("cpu-2core-quick.json", False): {
        "t0_s": 3.4693192549647914e-07,
        "t0_low_s": 3.083080158993353e-07,
        "t0_high_s": 3.606501133469175e-07,
        "cache_s_per_element": 1.374904375979966e-10,
        "cache_s_per_element_low": 1.118150292098872e-10,
        "cache_s_per_element_high": 1.734105230448128e-10,
        "r_inf_per_s": 7273233087.84473,
        "r_inf_low_per_s": 5766662728.660242,
        "r_inf_high_per_s": 8943341579.984808,
        "n_half": 2523.316759750675,
        "n_half_low": 1969.313659787947,
        "n_half_high": 3207.552126855805,
        "dram_s_per_element": 8.172789363580826e-10,
        "dram_s_per_element_low": None,
        "dram_s_per_element_high": None,
        "copy_bytes_per_s": 23611352789.746628,
        "triad_bytes_per_s": 11584197027.523857,
        "read_bytes_per_s": None,
        "ci_method": "bootstrap over points",
    },
}

#: The Xeon run (baseline) against the EPYC run: figure -> (ratio, p-value) of the EPYC's row.
FIGURES_XEON_VS_EPYC = {
    "t0, fixed cost per call": (0.8342547245522357, 9.037275633873127e-06),
    "per element, in cache": (0.4459044510229665, 1.965042753221799e-43),
    "r∞, in cache": (2.2426329176707287, 1.965042753221799e-43),
    "n½ = t0·r∞": (1.8709271070031708, None),
    "per element, from DRAM": (0.32351141385479343, None),
    "copy bandwidth": (1.446956580131325, 0.021133928129161116),
    "triad bandwidth": (2.537042782891451, 0.0001826717911095504),
    "read bandwidth": (None, None),
    "many vs one, 1,024 pieces (views)": (0.6762031684955004, 2.990103437670001e-44),
    "many vs one, 1,024 pieces (slices)": (0.7781225344736322, 1.4505892778589436e-23),
    "decode step, CPU fused": (0.7017004061755061, 4.697784903459565e-22),
    "decode step, CPU unfused": (0.5047587419280304, 4.3383680275831155e-20),
}

#: ``point_table`` of the same pair (all on the CPU; decode steps at batch 1, ctx 1024): the EPYC's point ->
#: (ratio of medians, p-value).
POINTS_XEON_VS_EPYC = {
    "case=decode_step op=decode_step dtype=float32 n_calls=126 plan=fused config=tiny-llama-4L-1024": (
        0.6789379179106161,
        4.697784903459608e-22,
    ),
    "case=decode_step op=decode_step dtype=float32 n_calls=158 plan=unfused config=tiny-llama-4L-1024": (
        0.6105524550341747,
        4.338368027583168e-20,
    ),
    "case=host_bandwidth op=copy dtype=float64 n=16777216": (None, None),
    "case=host_bandwidth op=read dtype=float32 n=33554432": (None, None),
    "case=host_bandwidth op=triad dtype=float64 n=16777216": (None, None),
    "case=many_vs_one op=np.add dtype=float32 n=256 pieces=1024 variant=slices n_calls=1024": (
        0.7727462176248021,
        1.4505892778589577e-23,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=256 pieces=1024 variant=views n_calls=1024": (
        0.6863310759702491,
        2.9901034376701017e-44,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=512 pieces=512 variant=slices n_calls=512": (
        0.7033799751423914,
        1.6547144538459467e-31,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=512 pieces=512 variant=views n_calls=512": (
        0.5923470206493061,
        5.635689020085879e-59,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=1024 pieces=256 variant=slices n_calls=256": (
        0.6270436863807597,
        6.64845892638772e-49,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=1024 pieces=256 variant=views n_calls=256": (
        0.49808498825843744,
        1.598943526974661e-71,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=2048 pieces=128 variant=slices n_calls=128": (
        0.8196497699711678,
        6.5389222802274125e-74,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=2048 pieces=128 variant=views n_calls=128": (
        0.5780980730123015,
        2.195622184523175e-34,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=4096 pieces=64 variant=slices n_calls=64": (
        0.7059764215896969,
        6.245761117817605e-27,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=4096 pieces=64 variant=views n_calls=64": (
        0.4208842903481735,
        1.0152604331018721e-47,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=8192 pieces=32 variant=slices n_calls=32": (
        0.5869776812351131,
        1.9136003056839888e-36,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=8192 pieces=32 variant=views n_calls=32": (
        0.3790663746583865,
        3.620275941256282e-23,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=16384 pieces=16 variant=slices n_calls=16": (
        0.3433613576044049,
        1.0954166971234912e-58,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=16384 pieces=16 variant=views n_calls=16": (
        0.3134046384032949,
        2.3583518845007427e-64,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=32768 pieces=8 variant=slices n_calls=8": (
        0.30958320377559295,
        1.746489951799903e-65,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=32768 pieces=8 variant=views n_calls=8": (
        0.2750396334109997,
        3.965802055105039e-25,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=65536 pieces=4 variant=slices n_calls=4": (
        0.2746803970126005,
        2.1726158263866294e-25,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=65536 pieces=4 variant=views n_calls=4": (
        0.2920954642802337,
        2.673945806541237e-70,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=131072 pieces=2 variant=slices n_calls=2": (
        0.2696088996539497,
        6.94973560790667e-72,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=131072 pieces=2 variant=views n_calls=2": (
        0.26370083768964964,
        6.702375522672499e-30,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=262144 pieces=1 variant=slices n_calls=1": (
        0.2677102834716464,
        4.465332343333291e-64,
    ),
    "case=many_vs_one op=np.add dtype=float32 n=262144 pieces=1 variant=views n_calls=1": (
        0.28305847180662963,
        2.4203138116149395e-29,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=1 n_calls=64": (
        0.9470259374154928,
        9.037275633873127e-06,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=4 n_calls=64": (
        1.164766203190156,
        5.990967620981294e-05,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=16 n_calls=64": (
        1.3453282613453013,
        9.252775082307484e-53,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=64 n_calls=64": (
        1.2204917159086073,
        3.7819930631992987e-06,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=256 n_calls=64": (
        1.3088874647676976,
        6.062715854634999e-17,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=1024 n_calls=64": (
        1.3290170710934388,
        2.636992632481655e-10,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=4096 n_calls=16": (
        0.9927709862822145,
        0.00022461964447509082,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=16384 n_calls=4": (
        0.528275897703181,
        5.878626101595716e-42,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=65536 n_calls=1": (
        0.31981817559461373,
        1.965042753221799e-43,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=262144 n_calls=1": (
        0.24047501418089412,
        1.0375347893068888e-26,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=1048576 n_calls=1": (
        0.19905192247443412,
        1.925651532294996e-50,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=4194304 n_calls=1": (
        0.3006944115127246,
        1.2410549276553616e-31,
    ),
    "case=ufunc_size op=np.add dtype=float32 n=16777216 n_calls=1": (
        0.36093607255240207,
        9.052395150780422e-19,
    ),
}


def _coordinate(value: object) -> object:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _same(actual: object, expected: object) -> bool:
    if expected is None:
        return isinstance(actual, float) and math.isnan(actual)
    if isinstance(expected, str):
        return actual == expected
    return actual == pytest.approx(expected, rel=PRECISION)


@pytest.mark.parametrize(("name", "samples"), list(HOST_FITS))
def test_host_figures_and_intervals_are_today_s(name: str, samples: bool) -> None:
    fit = fit_all(load_runs([DATA / name], samples=samples).frame).host.iloc[0]
    wrong = {
        column: (fit[column], expected)
        for column, expected in HOST_FITS[(name, samples)].items()
        if not _same(fit[column], expected)
    }
    assert not wrong


@pytest.fixture(scope="module")
def xeon_and_epyc():
    frame = load_runs([DATA / "cpu-2core-full.json", DATA / "cpu-2core-epyc-full.json"], samples=True).frame
    assert frame["machine_id"].iloc[0].startswith("vm / Linux / Intel")
    return frame


def test_figure_ratios_and_p_values_are_today_s(xeon_and_epyc) -> None:
    table = figure_table(xeon_and_epyc, fit_all(xeon_and_epyc), baseline=None)
    epyc = table[table["machine_id"].str.contains("AMD EPYC")].set_index("figure")
    assert set(epyc.index) == set(FIGURES_XEON_VS_EPYC)
    for figure, (ratio, p_value) in FIGURES_XEON_VS_EPYC.items():
        assert _same(epyc.loc[figure, "ratio"], ratio), figure
        assert _same(epyc.loc[figure, "p_value"], p_value), figure


def test_point_ratios_and_p_values_are_today_s(xeon_and_epyc) -> None:
    table = point_table(xeon_and_epyc, baseline=None)
    keys = point_columns(xeon_and_epyc)
    epyc = table[table["machine_id"].str.contains("AMD EPYC")]
    found = {}
    for row in epyc.to_dict("records"):
        name = " ".join(
            f"{key}={_coordinate(row[key])}"
            for key in keys
            if key not in ("device", "batch", "ctx")
            and not (isinstance(row[key], float) and math.isnan(row[key]))
        )
        found[name] = (row["ratio"], row["p_value"])
    assert set(found) == set(POINTS_XEON_VS_EPYC)
    for name, (ratio, p_value) in POINTS_XEON_VS_EPYC.items():
        assert _same(found[name][0], ratio), name
        assert _same(found[name][1], p_value), name
