// Several hosts (`mpirun --host a,b`, docs/CLI.md), tested on one machine: two network
// namespaces joined by a veth pair, with loopback-range addresses (127.77.x.1 and .2) and host
// names of their own (a UTS namespace each), stand in for two machines. mpirun runs on "host 1"
// and starts "host 2"'s part through an rsh agent that enters that host's namespaces, and the
// processes talk over TCP across the veth only (--mca btl tcp,self: no shared memory). Such a
// run must make the update of the same 2 processes on one host, bit for bit (two addends sum
// alike in any order), for the MLP and for a GPT with ZeRO-1.
//
// Needs root with CAP_NET_ADMIN (ip netns), nsenter and unshare, and MPI; skips saying which is
// missing otherwise (an unprivileged CI container).
#include <QCoreApplication>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <unistd.h>

#include "cli/cli_process.hpp"
#include "core/same_bits.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/weights.hpp"

namespace {

struct Command {
    int exit_code = -1;
    QString output;
};

Command run_command(const QString& program, const QStringList& arguments, int timeout_ms = 120000) {
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(program, arguments);
    Command result;
    if (!process.waitForStarted(10000)) {
        result.output = "cannot start " + program;
        return result;
    }
    if (!process.waitForFinished(timeout_ms)) {
        process.kill();
        process.waitForFinished(5000);
        result.output = QString::fromUtf8(process.readAll()) + "\n(timed out)";
        return result;
    }
    result.exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    result.output = QString::fromUtf8(process.readAll());
    return result;
}

}  // namespace

class CliTwoHostsTest : public QObject {
    Q_OBJECT

    QTemporaryDir folder_;
    // Names of this test's own namespaces and addresses, so parallel runs do not meet.
    QString prefix_ = QStringLiteral("tb%1").arg(QCoreApplication::applicationPid() % 100000);
    int subnet_ = 1 + static_cast<int>(QCoreApplication::applicationPid() % 250);
    QString agent_;
    bool namespaces_made_ = false;

    QString host_namespace(int host) const { return QStringLiteral("%1h%2").arg(prefix_).arg(host); }
    QString address(int host) const { return QStringLiteral("127.77.%1.%2").arg(subnet_).arg(host); }
    QString path(const QString& name) const { return folder_.filePath(name); }

    // `ip ...` must succeed; returns its failure otherwise.
    QString ip(const QStringList& arguments) {
        const Command command = run_command(QStringLiteral("ip"), arguments, 20000);
        return command.exit_code == 0 ? QString() : "ip " + arguments.join(' ') + ": " + command.output;
    }
    QString in_host(int host, const QStringList& arguments) {
        return ip(QStringList{"netns", "exec", host_namespace(host)} + arguments);
    }

    // Two hosts joined by a veth pair whose ends are both called tb0 (one per namespace).
    QString make_hosts() {
        for (int host : {1, 2})
            if (QString problem = ip({"netns", "add", host_namespace(host)}); !problem.isEmpty()) return problem;
        namespaces_made_ = true;
        const QString end1 = prefix_ + "a", end2 = prefix_ + "b";
        if (QString problem = ip({"link", "add", end1, "type", "veth", "peer", "name", end2}); !problem.isEmpty())
            return problem;
        for (int host : {1, 2}) {
            const QString end = host == 1 ? end1 : end2;
            if (QString problem = ip({"link", "set", end, "netns", host_namespace(host)}); !problem.isEmpty())
                return problem;
            for (const QStringList& step : {QStringList{"ip", "link", "set", end, "name", "tb0"},
                                            QStringList{"ip", "link", "set", "lo", "up"},
                                            QStringList{"ip", "addr", "add", address(host) + "/24", "dev", "tb0"},
                                            // 127/8 off the loopback device is "martian" unless allowed.
                                            QStringList{"sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"},
                                            QStringList{"sysctl", "-qw", "net.ipv4.conf.tb0.route_localnet=1"},
                                            QStringList{"ip", "link", "set", "tb0", "up"}}) {
                if (QString problem = in_host(host, step); !problem.isEmpty()) return problem;
            }
        }
        return {};
    }

    // `mpirun --host <host 1>,<host 2> -np 2 <command>`, started on host 1.
    Command on_two_hosts(const QStringList& command) {
        QStringList mpirun = {"mpirun", "--host", address(1) + "," + address(2), "-np", "2",
                              "--mca", "plm_rsh_agent", agent_,
                              // TCP over the veth only: the "hosts" share a kernel, and shared
                              // memory between them would hide what a network does.
                              "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "tb0",
                              "--mca", "oob_tcp_if_include", "tb0", "--bind-to", "none"};
        if (::geteuid() == 0) mpirun << "--allow-run-as-root";
        mpirun << command;
        QStringList quoted;
        for (const QString& word : mpirun) quoted << "'" + word + "'";
        return run_command(QStringLiteral("ip"),
                           {"netns", "exec", host_namespace(1), "unshare", "--uts", "--", "sh", "-c",
                            QStringLiteral("hostname %1 && exec %2").arg(host_namespace(1), quoted.join(' '))});
    }

    Command train_on_two_hosts(const QStringList& flags) {
        return on_two_hosts(QStringList{QStringLiteral(TRAINBENCH_CLI_PATH)} + flags);
    }

    // The same flags on two hosts and on one, as the same 2 processes: the same weights.
    void expect_same_update_as_one_host(const QString& name, const QStringList& flags) {
        const QString two_hosts = path(name + "-two-hosts.safetensors");
        const Command run = train_on_two_hosts(flags + QStringList{"--save-weights", two_hosts});
        QVERIFY2(run.exit_code == 0, qPrintable(run.output));
        const CliRun one_host = run_cli(flags + QStringList{"--processes", "2", "--save-weights",
                                                            path(name + "-one-host.safetensors")});
        QVERIFY2(one_host.exit_code == 0, CLI_DIAGNOSTICS(one_host));
        QVERIFY2(same_bits(trainbench::load_weights(two_hosts.toStdString()),
                           trainbench::load_weights(path(name + "-one-host.safetensors").toStdString())),
                 qPrintable(name + ": the run over two hosts made another update than on one"));
    }

private slots:
    void initTestCase() {
        if (!trainbench::mpi_built_in()) QSKIP("built without MPI: no runs of several processes");
        if (::geteuid() != 0) QSKIP("needs root to make network namespaces (ip netns) for the two hosts");
        for (const char* tool : {"ip", "nsenter", "unshare", "mpirun"})
            if (run_command(QStringLiteral("sh"), {"-c", QStringLiteral("command -v %1").arg(tool)}).exit_code != 0)
                QSKIP(qPrintable(QStringLiteral("needs %1 (iproute2, util-linux, openmpi-bin)").arg(tool)));
        QVERIFY(folder_.isValid());
        if (const QString problem = make_hosts(); !problem.isEmpty())
            QSKIP(qPrintable("cannot make two hosts as network namespaces here (no CAP_NET_ADMIN?): " + problem));

        // The rsh agent: mpirun calls it as `agent HOST COMMAND...`, as it would call ssh.
        agent_ = path("netns-rsh");
        QFile agent(agent_);
        QVERIFY(agent.open(QIODevice::WriteOnly));
        QStringList cases;
        for (int host : {1, 2})
            cases << QStringLiteral("  %1) name=%2 ;;").arg(address(host), host_namespace(host));
        agent.write(QStringLiteral("#!/bin/sh\n"
                                   "# Enters the host's network namespace, with a host name of its own.\n"
                                   "case \"$1\" in\n%1\n  *) echo \"unknown host $1\" >&2; exit 1 ;;\nesac\n"
                                   "shift\n"
                                   "exec nsenter --net=/var/run/netns/$name unshare --uts -- sh -c \"hostname $name; $*\"\n")
                        .arg(cases.join('\n'))
                        .toUtf8());
        agent.close();
        QVERIFY(QFile::setPermissions(agent_, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
    }

    void cleanupTestCase() {
        if (!namespaces_made_) return;
        // Deleting a namespace deletes its end of the veth, and with it the other.
        for (int host : {1, 2}) ip({"netns", "delete", host_namespace(host)});
    }

    // The two processes see two host names and two networks.
    void processesRunOnTwoHosts() {
        const QString probe = path("where.sh");
        QFile script(probe);
        QVERIFY(script.open(QIODevice::WriteOnly));
        script.write("#!/bin/sh\necho \"where: $(hostname) $(readlink /proc/self/ns/net)\"\n");
        script.close();
        QVERIFY(QFile::setPermissions(probe, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
        const Command run = on_two_hosts({probe});
        QVERIFY2(run.exit_code == 0, qPrintable(run.output));
        QStringList places;
        for (const QString& line : run.output.split('\n'))
            if (line.startsWith("where: ")) places << line.mid(7);
        places.sort();
        QCOMPARE(places.size(), 2);
        QVERIFY2(places[0].startsWith(host_namespace(1) + " ") && places[1].startsWith(host_namespace(2) + " "),
                 qPrintable(places.join(" | ")));
        QVERIFY2(places[0].section(' ', 1) != places[1].section(' ', 1), qPrintable(places.join(" | ")));
    }

    void mlpOverTwoHosts() {
        expect_same_update_as_one_host(
            "mlp", {"train", "--dataset", "spirals", "--samples", "2000", "--hidden", "64,64", "--batch-size", "64",
                    "--step-size", "2", "--epochs", "100", "--max-steps", "30", "--threads", "1", "--seed", "3",
                    "--quiet"});
    }

    void gptWithZeroOneOverTwoHosts() {
        expect_same_update_as_one_host(
            "gpt", {"train", "--model", "gpt", "--dataset", "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt",
                    "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--batch-size", "12",
                    "--epochs", "100", "--max-steps", "20", "--threads", "1", "--seed", "5", "--zero", "1",
                    "--quiet"});
    }
};

QTEST_MAIN(CliTwoHostsTest)
#include "test_cli_two_hosts.moc"
