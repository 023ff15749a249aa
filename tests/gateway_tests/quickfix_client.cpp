// A QuickFIX (C++) initiator driven line by line from stdin, for test_fix_quickfix.py.
//
// Usage: quickfix_client SETTINGS_FILE
// The settings file is QuickFIX's own (sessions, DataDictionary, validation flags); each session
// may add Password=... and ExsimExtensions=Y (sent on its Logon as 554 / 9801).
// stdin:  SEND <SenderCompID> <a whole FIX message, SOH written as '|'>  (QuickFIX parses it
//         with the session's dictionary, then sets the header: MsgSeqNum, SendingTime ...)
//         LOGOUT <SenderCompID>
//         QUIT
// stdout: LOGON <sender> | LOGOUT <sender> | APP <sender> <msg> | ADMIN <sender> <msg>
//         (a message QuickFIX validated and handed to the application)
//         SENT_REJECT <sender> <msg> | SENT_BMR <sender> <msg> (QuickFIX refused one of the
//         gateway's messages) | ERROR <text>
// Built by the test with: g++ -std=gnu++14 quickfix_client.cpp -lquickfix -lpthread

#include <quickfix/Application.h>
#include <quickfix/Log.h>
#include <quickfix/MessageStore.h>
#include <quickfix/Session.h>
#include <quickfix/SessionSettings.h>
#include <quickfix/SocketInitiator.h>

#include <iostream>
#include <map>
#include <mutex>
#include <string>

namespace {

std::mutex out_mutex;

void say(const std::string& line) {
  std::lock_guard<std::mutex> guard(out_mutex);
  std::cout << line << std::endl;
}

std::string bars(std::string s) {
  for (auto& c : s) if (c == '\x01') c = '|';
  return s;
}

class App : public FIX::Application {
 public:
  explicit App(const FIX::SessionSettings& settings) : settings_(settings) {}
  std::map<std::string, FIX::SessionID> sessions;

  void onCreate(const FIX::SessionID& id) override {
    sessions[id.getSenderCompID().getValue()] = id;
  }
  void onLogon(const FIX::SessionID& id) override {
    say("LOGON " + id.getSenderCompID().getValue());
  }
  void onLogout(const FIX::SessionID& id) override {
    say("LOGOUT " + id.getSenderCompID().getValue());
  }
  void toAdmin(FIX::Message& msg, const FIX::SessionID& id) override {
    const std::string type = msg.getHeader().getField(FIX::FIELD::MsgType);
    const FIX::Dictionary& d = settings_.get(id);
    if (type == "A") {
      msg.setField(553, id.getSenderCompID().getValue());
      if (d.has("Password")) msg.setField(554, d.getString("Password"));
      if (d.has("ExsimExtensions") && d.getString("ExsimExtensions") == "Y")
        msg.setField(9801, "Y");
    } else if (type == "3") {
      say("SENT_REJECT " + id.getSenderCompID().getValue() + " " + bars(msg.toString()));
    }
  }
  void toApp(FIX::Message& msg, const FIX::SessionID& id) throw(FIX::DoNotSend) override {
    if (msg.getHeader().getField(FIX::FIELD::MsgType) == "j")
      say("SENT_BMR " + id.getSenderCompID().getValue() + " " + bars(msg.toString()));
  }
  void fromAdmin(const FIX::Message& msg, const FIX::SessionID& id)
      throw(FIX::FieldNotFound, FIX::IncorrectDataFormat, FIX::IncorrectTagValue,
            FIX::RejectLogon) override {
    say("ADMIN " + id.getSenderCompID().getValue() + " " + bars(msg.toString()));
  }
  void fromApp(const FIX::Message& msg, const FIX::SessionID& id)
      throw(FIX::FieldNotFound, FIX::IncorrectDataFormat, FIX::IncorrectTagValue,
            FIX::UnsupportedMessageType) override {
    say("APP " + id.getSenderCompID().getValue() + " " + bars(msg.toString()));
  }

 private:
  const FIX::SessionSettings& settings_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: quickfix_client SETTINGS_FILE" << std::endl;
    return 2;
  }
  try {
    FIX::SessionSettings settings(argv[1]);
    App app(settings);
    FIX::MemoryStoreFactory store;
    FIX::SocketInitiator initiator(app, store, settings);
    initiator.start();
    std::string line;
    while (std::getline(std::cin, line)) {
      std::string cmd = line.substr(0, line.find(' '));
      if (cmd == "QUIT") break;
      std::string rest = line.size() > cmd.size() ? line.substr(cmd.size() + 1) : "";
      std::string sender = rest.substr(0, rest.find(' '));
      auto it = app.sessions.find(sender);
      if (it == app.sessions.end()) {
        say("ERROR no session " + sender);
        continue;
      }
      FIX::Session* session = FIX::Session::lookupSession(it->second);
      if (cmd == "LOGOUT") {
        session->logout("done");
        continue;
      }
      std::string raw = rest.substr(sender.size() + 1);
      for (auto& c : raw) if (c == '|') c = '\x01';
      try {
        const FIX::DataDictionary& dd =
            session->getDataDictionaryProvider().getSessionDataDictionary(FIX::BeginString("FIX.4.4"));
        FIX::Message msg(raw, dd, false);
        FIX::Session::sendToTarget(msg, it->second);
      } catch (std::exception& e) {
        say(std::string("ERROR send: ") + e.what());
      }
    }
    initiator.stop();
  } catch (std::exception& e) {
    say(std::string("ERROR ") + e.what());
    return 1;
  }
  return 0;
}
