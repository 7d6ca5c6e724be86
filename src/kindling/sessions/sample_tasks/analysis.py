"""Data analysis: computing on the user's data with execute_code (the ``code`` type)."""

from __future__ import annotations

from kindling.sessions.sample_data import (
    Call,
    Request,
    Task,
    py,
    python_traceback,
    remember,
    sh,
    write,
)


def _data_look(weight: int = 1) -> tuple[Call, Call]:
    """A first look at the user's data file: its header and size."""
    return (
        sh(
            "head -n 3 {data}",
            "id,user_id,{col},{by},created_at\n1,1042,12.5,A,2025-07-01\n2,1077,8.0,B,2025-07-01",
            weight=weight,
        ),
        sh("wc -l {data}", "48213 {data}", (1, "wc: {data}: No such file or directory"), weight=weight),
    )


# Follow-ups any analysis of the user's data file may get.
_DATA_FOLLOW_UPS = (
    Request(
        "Save the script as analysis.py so I can rerun it.",
        (
            write("analysis.py", "import pandas as pd\n\ndf = pd.read_csv('{data}')\nprint(df.describe())\n"),
            sh(
                "python analysis.py | head -n 4",
                "            id     user_id     {col}\ncount  48212.0  48212.0  47391.0\nmean   24106.5  30511.2     17.3",
                (
                    1,
                    "Traceback (most recent call last):\n  File \"analysis.py\", line 1, in <module>\n    import pandas as pd\nModuleNotFoundError: No module named 'pandas'",
                ),
            ),
        ),
        "It's in analysis.py; `python analysis.py` prints the same figures.",
    ),
    Request(
        "Put the key figures in report.md.",
        (write("report.md", "# Figures from {data}\n\n| metric | value |\n|---|---|\n| rows | 48,212 |\n"),),
        "report.md has the figures in a table.",
    ),
    Request(
        "Remember that our data files live in data/ and exports/.",
        (remember("The user's data files live in data/ and exports/."),),
        "Noted: I'll look in data/ and exports/ first next time.",
    ),
    Request(
        "How many rows does {data} have, and over which dates?",
        (
            py(
                "import pandas as pd\ndf = pd.read_csv('{data}', parse_dates=['created_at'])\n"
                "print(len(df), df['created_at'].min().date(), df['created_at'].max().date())",
                "{n} 2025-07-01 2025-12-31",
                python_traceback(2, "ValueError: Missing column provided to 'parse_dates': 'created_at'"),
                weight=3,
            ),
        ),
        "The rows and the date range are above.",
        weight=3,
    ),
    Request(
        "Check {col} for outliers.",
        (
            py(
                "import pandas as pd\ns = pd.read_csv('{data}')['{col}'].dropna()\nq1, q3 = s.quantile([0.25, 0.75])\n"
                "print(((s < q1 - 1.5 * (q3 - q1)) | (s > q3 + 1.5 * (q3 - q1))).sum(), 'outliers of', len(s))",
                "{x}{y}{z} outliers of {n}",
                python_traceback(2, "KeyError: '{col}'"),
                weight=3,
            ),
        ),
        "A few hundred values of {col} lie outside 1.5 IQR; all on the high side.",
        weight=3,
    ),
)


TASKS: tuple[Task, ...] = (
    Task(
        Request(
            "Compute the monthly churn from {data}.",
            (
                *_data_look(),
                py(
                    "import pandas as pd\ndf = pd.read_csv('{data}', parse_dates=['created_at'])\n"
                    "monthly = df.set_index('created_at').resample('MS')['user_id'].nunique()\n"
                    "churn = 1 - monthly.shift(-1) / monthly\nprint(churn.round(3).tail(6))",
                    "created_at\n2025-07-01    0.0{x}\n2025-08-01    0.0{y}\n2025-09-01    0.0{z}\n2025-10-01    0.0{x}\n"
                    "2025-11-01    0.0{y}\n2025-12-01      NaN\nName: user_id, dtype: float64",
                    python_traceback(
                        2, "ValueError: Missing column provided to 'parse_dates': 'signup_date'"
                    ),
                    weight=10,
                ),
            ),
            "Monthly churn is in the table above; it stays under 10% every month.",
        ),
        (
            Request(
                "Plot it and save the chart as churn.png.",
                (
                    py(
                        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
                        "df = pd.read_csv('{data}', parse_dates=['created_at'])\n"
                        "monthly = df.set_index('created_at').resample('MS')['user_id'].nunique()\n"
                        "(1 - monthly.shift(-1) / monthly).plot(marker='o')\nplt.savefig('churn.png', dpi=120)\nprint('saved churn.png')",
                        "saved churn.png",
                        python_traceback(1, "ModuleNotFoundError: No module named 'matplotlib'"),
                    ),
                ),
                "The chart is saved as churn.png.",
                weight=3,
            ),
            *_DATA_FOLLOW_UPS,
        ),
        ("data",),
    ),
    Task(
        Request(
            "Plot latency percentiles (p50/p95/p99) from {logs} and save the chart as latency.png.",
            (
                sh(
                    "ls {logs} | head -n 3",
                    "logs/api-2026-01-01.jsonl\nlogs/api-2026-01-02.jsonl\nlogs/api-2026-01-03.jsonl",
                ),
                py(
                    "import glob, json\nimport numpy as np\n"
                    "vals = [json.loads(l)['duration_ms'] for f in glob.glob('{logs}') for l in open(f)]\n"
                    "print(len(vals), np.percentile(vals, [50, 95, 99]).round(1))",
                    "{n} [ {x}{y}.4  {y}{z}{x}.0  {z}{y}{x}{x}.7]",
                    python_traceback(
                        3, "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
                    ),
                    weight=6,
                ),
                py(
                    "import glob, json\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
                    "rows = [json.loads(l) for f in glob.glob('{logs}') for l in open(f)]\n"
                    "df = pd.DataFrame(rows).assign(ts=lambda d: pd.to_datetime(d['ts']))\n"
                    "df.set_index('ts')['duration_ms'].resample('h').quantile([0.5, 0.95, 0.99]).unstack().plot()\n"
                    "plt.savefig('latency.png', dpi=120)\nprint('saved latency.png')",
                    "saved latency.png",
                    python_traceback(4, "KeyError: 'ts'"),
                    weight=6,
                ),
            ),
            "The chart is in latency.png: p50, p95 and p99 per hour.",
        ),
        (
            Request(
                "Also show the percentiles per endpoint.",
                (
                    py(
                        "import glob, json\nimport pandas as pd\n"
                        "df = pd.DataFrame(json.loads(l) for f in glob.glob('{logs}') for l in open(f))\n"
                        "print(df.groupby('endpoint')['duration_ms'].quantile([0.5, 0.95, 0.99]).unstack().round(1).head())",
                        "endpoint         0.50    0.95     0.99\n/v1/orders     {x}{y}.0   {y}{z}{x}.5   {z}{x}{y}{x}.0\n/v1/search     {y}{x}.5   {x}{z}{y}.0   {x}{y}{z}{z}.5",
                        python_traceback(3, "KeyError: 'endpoint'"),
                    ),
                ),
                "Per endpoint, /v1/search has the slowest tail.",
                weight=3,
            ),
        ),
        ("logs",),
    ),
    Task(
        Request(
            "Fit a linear model of {col} against {by} in {data} and tell me the coefficients.",
            (
                *_data_look(),
                py(
                    "import numpy as np\nfrom numpy.linalg import lstsq\nimport pandas as pd\ndf = pd.read_csv('{data}')\n"
                    "X = np.c_[np.ones(len(df)), pd.get_dummies(df['{by}'], drop_first=True, dtype=float)]\n"
                    "coef, *_ = lstsq(X, df['{col}'], rcond=None)\nprint(coef.round(3))",
                    "[{x}.{y}{z}{x}  -{y}.{z}{x}{y}   {z}.{x}{y}{z}]",
                    python_traceback(4, "ValueError: array must not contain infs or NaNs"),
                    weight=6,
                ),
                py(
                    "import pandas as pd\nimport statsmodels.formula.api as smf\ndf = pd.read_csv('{data}')\n"
                    "print(smf.ols('{col} ~ C({by})', df).fit().params.round(3))",
                    "Intercept    {x}.{y}{z}{x}\nC({by})[T.B]   -{y}.{z}{x}{y}\ndtype: float64",
                    python_traceback(2, "ModuleNotFoundError: No module named 'statsmodels'"),
                ),
            ),
            "The coefficients are above: the intercept, then one per {by} against the first.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
    Task(
        Request(
            "What's the average {col} per {by} in {data}?",
            (
                *_data_look(),
                py(
                    "import pandas as pd\ndf = pd.read_csv('{data}')\n"
                    "print(df.groupby('{by}')['{col}'].agg(['mean', 'median', 'count']).round(2))",
                    "               mean  median  count\n{by}\nA            {x}.41   {y}.00    {n}\nB            {y}.07   {z}.50    {x}{y}{z}\n"
                    "C            {z}.93   {x}.25    {y}{x}{z}",
                    python_traceback(3, "KeyError: '{col}_usd'"),
                    weight=8,
                ),
            ),
            "The averages per {by} are in the table above, with medians and counts.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
    Task(
        Request(
            "Calculate the correlation between {col} and the other numeric columns of {data}.",
            (
                *_data_look(),
                py(
                    "import pandas as pd\ndf = pd.read_csv('{data}')\n"
                    "print(df.select_dtypes('number').corr()['{col}'].round(3))",
                    "id          0.0{x}{y}\nuser_id    -0.0{y}{z}\n{col}        1.000\nName: {col}, dtype: float64",
                    python_traceback(3, "ValueError: could not convert string to float: 'n/a'"),
                    weight=8,
                ),
            ),
            "Nothing correlates strongly with {col}; the figures are above.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
    Task(
        Request(
            "Simulate 10,000 rolls of two dice and show the distribution of the sum.",
            (
                py(
                    "import numpy as np\nrng = np.random.default_rng(0)\nrolls = rng.integers(1, 7, size=(10_000, 2)).sum(axis=1)\n"
                    "print(np.bincount(rolls)[2:])",
                    "[ 2{x}{y}  5{z}{x}  8{y}{z} 11{x}{x} 13{y}{z} 16{z}{x} 13{x}{y} 11{z}{z}  8{y}{x}  5{x}{z}  2{z}{y}]",
                    python_traceback(1, "NameError: name 'np' is not defined"),
                    weight=6,
                ),
            ),
            "Sums of 7 are the most common, about one roll in six, as expected.",
        ),
        (
            Request(
                "Draw it as a bar chart in dice.png.",
                (
                    py(
                        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport numpy as np\n"
                        "rolls = np.random.default_rng(0).integers(1, 7, size=(10_000, 2)).sum(axis=1)\n"
                        "plt.bar(range(2, 13), np.bincount(rolls)[2:])\nplt.savefig('dice.png')\nprint('saved dice.png')",
                        "saved dice.png",
                    ),
                ),
                "The bar chart is in dice.png.",
                weight=3,
            ),
        ),
    ),
    Task(
        Request(
            "How many rows of {data} have a missing {col}? Drop them and give me summary statistics.",
            (
                *_data_look(),
                py(
                    "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df['{col}'].isna().sum())\n"
                    "print(df.dropna(subset=['{col}'])['{col}'].describe().round(2))",
                    "{x}{y}\ncount    {n}.00\nmean       {y}{z}.{x}1\nstd        {z}.{y}8\nmin         0.00\n"
                    "50%        {y}{x}.00\nmax       {z}{x}{y}.00\nName: {col}, dtype: float64",
                    python_traceback(
                        2, "FileNotFoundError: [Errno 2] No such file or directory: '{data_name}'"
                    ),
                    weight=8,
                ),
            ),
            "The rows with a missing {col} are dropped; the summary is above.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
    Task(
        Request(
            "Estimate pi with a Monte Carlo simulation in numpy, 1e6 samples.",
            (
                py(
                    "import numpy as np\npts = np.random.default_rng(1).random((1_000_000, 2))\n"
                    "print(4 * (np.hypot(pts[:, 0], pts[:, 1]) <= 1).mean())",
                    "3.14{x}{y}{z}",
                    python_traceback(2, "TypeError: 'float' object cannot be interpreted as an integer"),
                    weight=6,
                ),
            ),
            "The estimate is within 0.01 of pi, as 1e6 samples allow.",
        ),
        (
            Request(
                "Show how the estimate converges as the sample grows.",
                (
                    py(
                        "import numpy as np\npts = np.random.default_rng(1).random((1_000_000, 2))\n"
                        "inside = (np.hypot(pts[:, 0], pts[:, 1]) <= 1).cumsum()\n"
                        "for n in (100, 10_000, 1_000_000):\n    print(n, 4 * inside[n - 1] / n)",
                        "100 3.{x}{y}\n10000 3.1{z}{x}{y}\n1000000 3.14{y}{z}{x}",
                    ),
                ),
                "The error shrinks roughly with the square root of the sample size.",
                weight=3,
            ),
        ),
    ),
    Task(
        Request(
            "Count the requests per hour in {logs} and show the busiest hours.",
            (
                sh(
                    "ls {logs} | head -n 3",
                    "logs/api-2026-01-01.jsonl\nlogs/api-2026-01-02.jsonl\nlogs/api-2026-01-03.jsonl",
                ),
                py(
                    "import glob\nimport pandas as pd\n"
                    "df = pd.concat(pd.read_json(f, lines=True) for f in glob.glob('{logs}'))\n"
                    "print(df.set_index('ts').resample('h').size().nlargest(5))",
                    "ts\n2026-01-05 14:00:00    {n}\n2026-01-05 15:00:00    {x}{y}{z}{x}\n2026-01-06 14:00:00    {y}{z}{x}{y}\ndtype: int64",
                    python_traceback(3, "ValueError: Expected object or value"),
                    weight=8,
                ),
            ),
            "The busiest hours are early afternoon UTC, listed above.",
        ),
        (
            Request(
                "Which endpoints get the most requests in the busiest hour?",
                (
                    py(
                        "import glob\nimport pandas as pd\n"
                        "df = pd.concat(pd.read_json(f, lines=True) for f in glob.glob('{logs}'))\n"
                        "busiest = df.set_index('ts').resample('h').size().idxmax()\n"
                        "print(df[df['ts'].dt.floor('h') == busiest]['endpoint'].value_counts().head(3))",
                        "endpoint\n/v1/search    {n}\n/v1/orders    {x}{y}{z}\n/v1/login      {y}{z}\nName: count, dtype: int64",
                        python_traceback(
                            4, "AttributeError: Can only use .dt accessor with datetimelike values"
                        ),
                    ),
                ),
                "/v1/search takes most of the busiest hour.",
                weight=3,
            ),
        ),
        ("logs",),
    ),
    Task(
        Request(
            "Solve this system of equations: 3x + 2y = 12, x - y = 1.",
            (
                py(
                    "import numpy as np\nA = np.array([[3, 2], [1, -1]])\nb = np.array([12, 1])\nprint(np.linalg.solve(A, b))",
                    "[2.8 1.8]",
                    weight=4,
                ),
                py(
                    "import sympy as sp\nx, y = sp.symbols('x y')\nprint(sp.solve([3*x + 2*y - 12, x - y - 1], [x, y]))",
                    "{x: 14/5, y: 9/5}",
                    python_traceback(1, "ModuleNotFoundError: No module named 'sympy'"),
                ),
            ),
            "x = 2.8 and y = 1.8 (14/5 and 9/5).",
        ),
        (
            Request(
                "Check the solution by substituting it back.",
                (py("x, y = 2.8, 1.8\nprint(3 * x + 2 * y, x - y)", "12.0 1.0", weight=4),),
                "Both equations hold: 12 and 1.",
                weight=3,
            ),
        ),
    ),
    Task(
        Request(
            "Give me the top 10 {by} values by total {col} in {data}.",
            (
                *_data_look(),
                py(
                    "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df.groupby('{by}')['{col}'].sum().nlargest(10))",
                    "{by}\nA    {n}\nB    {x}{y}{z}{x}{y}\nC    {y}{z}{x}{z}\nName: {col}, dtype: float64",
                    weight=6,
                ),
                py(
                    "print(df.groupby('{by}')['{col}'].sum().nlargest(10))",
                    "{by}\nA    {n}\nB    {x}{y}{z}{x}{y}\nName: {col}, dtype: float64",
                    python_traceback(1, "NameError: name 'df' is not defined"),
                ),
            ),
            "The top {by} values by total {col} are listed above.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
    Task(
        Request(
            "Is {col} in {data} normally distributed? Draw a histogram and run a Shapiro test.",
            (
                *_data_look(),
                py(
                    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
                    "df = pd.read_csv('{data}')\ndf['{col}'].hist(bins=40)\nplt.savefig('{col}_hist.png', dpi=120)\nprint('saved')",
                    "saved",
                    weight=4,
                ),
                py(
                    "from scipy import stats\nimport pandas as pd\n"
                    "print(stats.shapiro(pd.read_csv('{data}')['{col}'].dropna().sample(5000, random_state=0)))",
                    "ShapiroResult(statistic=0.9{x}{y}, pvalue=1.{z}e-{x}{y})",
                    python_traceback(1, "ModuleNotFoundError: No module named 'scipy'"),
                    weight=4,
                ),
            ),
            "No: the histogram is skewed right and the Shapiro test rejects normality.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
    Task(
        Request(
            "Load {data} with pandas and run a quick exploratory analysis.",
            (
                *_data_look(),
                py(
                    "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df.shape)\nprint(df.dtypes)",
                    "({n}, 5)\nid              int64\nuser_id         int64\n{col}          float64\n{by}            object\n"
                    "created_at      object\ndtype: object",
                    weight=4,
                ),
                py(
                    "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df.describe().round(2))\nprint(df.isna().sum())",
                    "            id   user_id   {col}\ncount  {n}.0  {n}.0  {n}.0\nmean   {x}{y}{z}.5  {y}{z}{x}.1  {z}{x}.{y}\n"
                    "id      0\n{col}   {x}{y}\ndtype: int64",
                    weight=4,
                ),
                py(
                    "import pandas as pd\nfrom ydata_profiling import ProfileReport\n"
                    "ProfileReport(pd.read_csv('{data}')).to_file('profile.html')\nprint('wrote profile.html')",
                    "wrote profile.html",
                    python_traceback(2, "ModuleNotFoundError: No module named 'ydata_profiling'"),
                ),
            ),
            "The data has five columns; {col} has a few gaps, and the rest is complete.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
    Task(
        Request(
            "Forecast next month's {col} from the weekly totals in {data}.",
            (
                *_data_look(),
                py(
                    "import numpy as np\nimport pandas as pd\ndf = pd.read_csv('{data}', parse_dates=['created_at'])\n"
                    "weekly = df.set_index('created_at')['{col}'].resample('W').sum()\n"
                    "slope, start = np.polyfit(range(len(weekly)), weekly, 1)\n"
                    "print(round(sum(start + slope * (len(weekly) + i) for i in range(4)), 1))",
                    "{n}.{x}",
                    python_traceback(
                        4,
                        "TypeError: Only valid with DatetimeIndex, TimedeltaIndex or PeriodIndex, but got an instance of 'RangeIndex'",
                    ),
                    weight=8,
                ),
            ),
            "A linear trend on the weekly totals gives the figure above for next month.",
        ),
        _DATA_FOLLOW_UPS,
        ("data",),
    ),
)
