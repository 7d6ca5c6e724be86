"""System administration: services, disks, packages, ports and cron (``terminal``)."""

from __future__ import annotations

from kindling.sessions.sample_data import (
    Request,
    Task,
    ask,
    edit,
    read,
    remember,
    sh,
    write,
)

_RESTART = Request(
    "Restart {service} and check it stays up.",
    (
        sh(
            "sudo systemctl restart {service}",
            "",
            (
                1,
                "Job for {service}.service failed because the control process exited with error code.\n"
                'See "systemctl status {service}.service" and "journalctl -xeu {service}.service" for details.',
            ),
            weight=2,
        ),
        sh("systemctl is-active {service}", "active", (3, "activating")),
    ),
    "{service} is running again.",
)
_REMEMBER_DEBIAN = Request(
    "Remember that this server runs Debian 12 with systemd.",
    (remember("The user's server runs Debian 12 with systemd."),),
    "Noted: Debian 12 with systemd.",
)
_ERRORS = Request(
    "Show me the last errors in its log.",
    (
        sh(
            "journalctl -u {service} -p err --since '1 hour ago' --no-pager",
            "Jan 05 10:01:12 box {service}[812]: {svc_error}",
            weight=2,
        ),
        read(
            "{svc_log}",
            "2026-01-05T10:01:12Z [error] {svc_error}\n2026-01-05T10:14:40Z [error] {svc_error}\n",
        ),
    ),
    "The last errors are above; they are all the same one.",
)

TASKS: tuple[Task, ...] = (
    Task(
        Request(
            "Check why the {service} service keeps restarting on this box.",
            (
                sh(
                    "systemctl status {service} --no-pager",
                    "● {service}.service\n     Active: activating (auto-restart) (Result: exit-code) since Mon 2026-01-05 10:01:13 UTC; 2s ago",
                    weight=2,
                ),
                sh(
                    "journalctl -u {service} -n 20 --no-pager",
                    "Jan 05 10:01:12 box {service}[812]: {svc_error}\n"
                    "Jan 05 10:01:13 box systemd[1]: {service}.service: Scheduled restart job, restart counter is at 5.",
                    (
                        1,
                        "Hint: You are currently not seeing messages from other users and the system.\n"
                        "      Users in groups 'adm', 'systemd-journal' can see all messages.",
                    ),
                    weight=2,
                ),
                read("{conf}", "# {service} configuration\n{conf_line}\n"),
                read(
                    "{svc_log}",
                    "2026-01-05T10:01:12Z [error] {svc_error}\n2026-01-05T10:01:13Z [notice] exiting\n",
                ),
            ),
            "It exits at start-up ({svc_error}) and systemd restarts it every few seconds.",
        ),
        (_RESTART, _ERRORS, _REMEMBER_DEBIAN),
        ("service",),
    ),
    Task(
        Request(
            "Free up disk space, / is at 97%.",
            (
                sh(
                    "df -h /",
                    "Filesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p2  234G  227G  7.0G  97% /",
                    weight=2,
                ),
                sh(
                    "sudo du -sh /var/lib/docker /var/log /home/* 2>/dev/null | sort -rh | head -n 5",
                    "14G\t/var/lib/docker\n2.1G\t/var/log\n1.4G\t/home/user",
                    weight=2,
                ),
                sh(
                    "docker system df",
                    "TYPE            TOTAL     ACTIVE    SIZE      RECLAIMABLE\nImages          38        6         13.9GB    11.2GB (80%)",
                    (
                        1,
                        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
                    ),
                ),
                sh(
                    "journalctl --disk-usage", "Archived and active journals take up 1.9G in the file system."
                ),
                ask("Docker holds 11 GB of unused images. Remove them?", ("yes", "no")),
            ),
            "Most of the space is unused docker images (11 GB) and old journals (1.9 GB).",
        ),
        (
            Request(
                "Clean up the unused docker images.",
                (
                    sh(
                        "docker image prune -af",
                        "Deleted Images:\nuntagged: app:old\nTotal reclaimed space: 11.2GB",
                        (
                            1,
                            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
                        ),
                        weight=2,
                    ),
                    sh(
                        "df -h /",
                        "Filesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p2  234G  216G   18G  92% /",
                    ),
                ),
                "11.2 GB freed; / is at 92% now.",
            ),
            Request(
                "Vacuum the journal down to 500M.",
                (
                    sh(
                        "sudo journalctl --vacuum-size=500M",
                        "Vacuuming done, freed 1.4G of archived journals from /var/log/journal.",
                    ),
                ),
                "The journal is down to 500M.",
            ),
            _REMEMBER_DEBIAN,
        ),
    ),
    Task(
        Request(
            "Set up a cron job that backs up {backup_dir} every night at 2am.",
            (
                sh("crontab -l", "# m h  dom mon dow   command", (1, "no crontab for user"), weight=2),
                write(
                    "~/bin/backup-nightly.sh",
                    "#!/bin/sh\nset -e\nmkdir -p ~/backups\ntar czf ~/backups/nightly-$(date +%F).tgz {backup_dir}\n",
                ),
                sh(
                    "chmod +x ~/bin/backup-nightly.sh && (crontab -l 2>/dev/null; echo '0 2 * * * ~/bin/backup-nightly.sh') | crontab -",
                    "",
                    weight=2,
                ),
                sh("crontab -l | tail -n 1", "0 2 * * * ~/bin/backup-nightly.sh", weight=2),
            ),
            "The backup runs every night at 02:00 into ~/backups.",
        ),
        (
            Request(
                "Test the backup once now.",
                (
                    sh(
                        "~/bin/backup-nightly.sh && ls -lh ~/backups | tail -n 1",
                        "-rw-r--r-- 1 user user 48M Jan  5 10:20 nightly-2026-01-05.tgz",
                        (2, "tar: {backup_dir}: Cannot stat: No such file or directory"),
                        weight=2,
                    ),
                ),
                "It works: ~/backups/nightly-2026-01-05.tgz, 48 MB.",
            ),
            Request(
                "Keep only the last 7 backups.",
                (
                    edit(
                        "~/bin/backup-nightly.sh",
                        "tar czf ~/backups/nightly-$(date +%F).tgz {backup_dir}\n",
                        "tar czf ~/backups/nightly-$(date +%F).tgz {backup_dir}\nls -1t ~/backups/nightly-*.tgz | tail -n +8 | xargs -r rm --\n",
                    ),
                    sh("~/bin/backup-nightly.sh && ls ~/backups | wc -l", "7", weight=2),
                ),
                "Older backups are removed; seven are kept.",
            ),
        ),
    ),
    Task(
        Request(
            "Install {pkg} and make sure it runs.",
            (
                sh(
                    "sudo apt-get install -y {pkg}",
                    "Setting up {pkg} ...\nProcessing triggers for man-db (2.12.0-4build2) ...",
                    (100, "E: Unable to locate package {pkg}"),
                    weight=2,
                ),
                sh("sudo apt-get update", "Reading package lists... Done"),
                sh("{run}", "{version}", weight=2),
            ),
            "{pkg} is installed and runs: {version}.",
        ),
        (
            Request(
                "Which version did it install?",
                (
                    sh(
                        "apt-cache policy {pkg} | head -n 3",
                        "{pkg}:\n  Installed: (see {run})\n  Candidate: (same)",
                    ),
                    sh("{run}", "{version}"),
                ),
                "{version}.",
            ),
            _REMEMBER_DEBIAN,
        ),
        ("pkg",),
    ),
    Task(
        Request(
            "Which process is listening on port {port}? Kill it.",
            (
                sh(
                    "sudo ss -ltnp 'sport = :{port}'",
                    "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
                    'LISTEN 0      511          0.0.0.0:{port}      0.0.0.0:*     users:(("{proc}",pid={pid},fd=21))',
                    weight=3,
                ),
                sh("ps -o pid,user,cmd -p {pid}", "    PID USER     CMD\n  {pid} app      {cmd}"),
                sh(
                    "sudo kill {pid}",
                    "",
                    (1, "kill: (sending signal to {pid} failed): Operation not permitted"),
                    weight=2,
                ),
                sh("sudo ss -ltn 'sport = :{port}' | tail -n +2 | wc -l", "0"),
            ),
            "{proc} (pid {pid}) held port {port}; it is stopped and the port is free.",
        ),
        (
            Request(
                "Make sure it doesn't come back after a reboot.",
                (
                    sh(
                        "systemctl status {unit} --no-pager | head -n 2",
                        "● {unit}\n     Loaded: loaded (/etc/systemd/system/{unit}; enabled)",
                    ),
                    sh(
                        "sudo systemctl disable --now {unit}",
                        'Removed "/etc/systemd/system/multi-user.target.wants/{unit}".',
                        weight=2,
                    ),
                ),
                "{unit} is disabled, so it won't start at boot.",
            ),
            _RESTART,
        ),
        ("port", "service"),
    ),
    Task(
        Request(
            "Show me the {service} error log for the last hour.",
            (
                sh(
                    "journalctl -u {service} --since '1 hour ago' -p err --no-pager",
                    "Jan 05 10:01:12 box {service}[812]: {svc_error}",
                    weight=2,
                ),
                sh(
                    "sudo tail -n 20 {svc_log}",
                    "2026-01-05T10:01:12Z [error] {svc_error}",
                    (1, "tail: cannot open '{svc_log}' for reading: Permission denied"),
                ),
                read(
                    "{svc_log}",
                    "2026-01-05T10:01:12Z [error] {svc_error}\n2026-01-05T10:14:40Z [error] {svc_error}\n",
                ),
            ),
            "One error, repeated: {svc_error}.",
        ),
        (
            Request(
                "How many of those errors are there per minute?",
                (
                    sh(
                        "journalctl -u {service} --since '1 hour ago' -p err -o short-iso --no-pager | cut -c1-16 | uniq -c | tail -n 3",
                        "      3 2026-01-05T10:01\n      1 2026-01-05T10:14",
                        weight=2,
                    ),
                ),
                "A burst of three at 10:01, then one at 10:14.",
            ),
            _RESTART,
        ),
        ("service",),
    ),
)
